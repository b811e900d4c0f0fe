package policy_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/groupexec/groupexec/policy"
)

// A resolver's invalid answer is an *OptionError, as an invalid option
// is: errors.As gives the resolver (Option), the group it answered for
// (Group) and the value (Value), which a program reading its limits from
// configuration needs to say which entry is wrong. Its message is the one
// it always had.
func TestResolverInvalidAnswerIsAnOptionError(t *testing.T) {
	tests := []struct {
		name  string
		opt   func(func(string) (int, bool)) policy.Option
		value int
	}{
		{"WithMaxInFlightResolver", policy.WithMaxInFlightResolver, 0},
		{"WithMaxConcurrencyResolver", policy.WithMaxConcurrencyResolver, -2},
		{"WithQueueThresholdResolver", policy.WithQueueThresholdResolver, -1},
		{"WithShareResolver", policy.WithShareResolver, 0},
	}
	for _, tt := range tests {
		p, err := policy.New(tt.opt(func(string) (int, bool) { return tt.value, true }))
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Group("tenant-a")
		var oe *policy.OptionError
		if !errors.As(err, &oe) || !errors.Is(err, policy.ErrInvalidOption) {
			t.Errorf("%s: Group = %v; want an *OptionError matching ErrInvalidOption", tt.name, err)
			continue
		}
		if oe.Option != tt.name || oe.Group != "tenant-a" || oe.Value != tt.value || oe.Reason == "" {
			t.Errorf("%s: OptionError{Option: %q, Group: %q, Value: %#v, Reason: %q}; want the resolver, the group and the value",
				tt.name, oe.Option, oe.Group, oe.Value, oe.Reason)
		}
		want := fmt.Sprintf(`policy: invalid option: %s gave %d for group "tenant-a": %s`, tt.name, tt.value, oe.Reason)
		if err.Error() != want {
			t.Errorf("%s: message %q; want %q", tt.name, err, want)
		}
	}
}
