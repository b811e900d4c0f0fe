package breaker_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/breaker"
)

// Execute with a nil function is the caller's bug, not a failure of the
// dependency: it panics at once, saying so, and counts nothing. Counted, a
// nil function at each call would trip the breaker on a dependency that
// never failed, and a half-open probe's failure would reopen it.
func TestExecuteNilFunctionCountsNothing(t *testing.T) {
	for _, halfOpen := range []bool{false, true} {
		clk := new(fakeClock)
		cb := mustNew(t, breaker.Settings{Clock: clk, MaxRequests: 2}) // a probe slot left for Execute
		if halfOpen {
			trip(t, cb)
			clk.Advance(breaker.DefaultTimeout)
			if _, err := cb.AllowTicket(); err != nil { // moves it to half-open
				t.Fatal(err)
			}
		}
		state, before := cb.State(), cb.Counts()
		var r any
		func() {
			defer func() { r = recover() }()
			breaker.Execute[int](cb, nil)
		}()
		if _, runtimeErr := r.(interface{ RuntimeError() }); r == nil || runtimeErr || !strings.Contains(fmt.Sprint(r), "Execute") {
			t.Errorf("half-open %v: Execute(cb, nil) panicked with %v; want a panic naming Execute", halfOpen, r)
		}
		if cb.State() != state || cb.Counts() != before {
			t.Errorf("half-open %v: Execute(cb, nil) moved the breaker from %v %+v to %v %+v", halfOpen, state, before, cb.State(), cb.Counts())
		}
	}
}
