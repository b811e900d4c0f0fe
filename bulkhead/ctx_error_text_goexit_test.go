package bulkhead_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
)

// exitingText is an error whose Error exits the goroutine.
type exitingText struct{}

func (exitingText) Error() string {
	runtime.Goexit()
	return ""
}

// exitingErrContext is a context that has ended, with an exitingText error.
type exitingErrContext struct{ context.Context }

func (exitingErrContext) Err() error { return exitingText{} }

// The refusal of a request whose context ended before it could wait names
// the context's error (Event.Detail): the caller's code, which may exit
// the goroutine. Read under the bulkhead's mutex, it left the mutex held,
// and every later call blocked; read before, it ends the caller's
// goroutine alone, as any code of its own would.
func TestContextErrorTextExitingBeforeTheWaitLeavesNoLockHeld(t *testing.T) {
	b := newBH(t, 1, bulkhead.WithQueue(2, time.Hour), bulkhead.WithEventLog(16))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = b.Acquire(exitingErrContext{context.Background()}, 1)
		t.Error("Acquire returned: the context's error text did not exit the goroutine")
	}()
	<-done
	if bulkhead.Locked(b) {
		t.Fatal("the bulkhead's mutex is held after the context's error text exited the goroutine")
	}
	whole(t, b, 0)
}
