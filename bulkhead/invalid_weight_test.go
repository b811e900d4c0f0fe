package bulkhead_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
)

// An invalid weight is named by the method it was given to, as every other
// invalid argument is ("SetLimit n", "Submit fn"), whatever the bulkhead's
// configuration and whether a capability is carried: the caller reads the
// message to find the call to fix. The state is left as it was.
func TestInvalidWeightNamesTheMethod(t *testing.T) {
	configs := map[string][]bulkhead.Option{
		"plain":      nil,
		"queue":      {bulkhead.WithQueue(1, time.Second)},
		"capability": {bulkhead.WithRequiredCapability("remote")},
		"event log":  {bulkhead.WithEventLog(8)},
	}
	for name, opts := range configs {
		b := newBH(t, 2, opts...)
		before := stateOf(b)
		for _, n := range []int{0, -1} {
			for method, call := range map[string]func(context.Context, int) (bulkhead.Permit, error){
				"TryAcquire": b.TryAcquire, "Acquire": b.Acquire,
			} {
				for _, ctx := range []context.Context{remote, bg} {
					_, err := call(ctx, n)
					var ce *bulkhead.ConfigError
					want := method + " n"
					if !errors.As(err, &ce) || ce.Option != want || ce.Value != n || !strings.Contains(err.Error(), fmt.Sprintf("%s = %d", want, n)) {
						t.Errorf("%s: %s(%d): %v; want a *ConfigError naming %q and %d", name, method, n, err, want, n)
					}
				}
			}
		}
		if got := stateOf(b); got != before {
			t.Errorf("%s: invalid weights changed the state from %+v to %+v", name, before, got)
		}
	}
}
