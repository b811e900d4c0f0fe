package executor_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/internal/clocktest"
	"github.com/groupexec/groupexec/policy"
)

// nilListener is a Listener whose methods need their receiver.
type nilListener struct{ n int }

func (l *nilListener) OnSubmitted(executor.Event) { l.n++ }
func (l *nilListener) OnStarted(executor.Event)   { l.n++ }
func (l *nilListener) OnCompleted(executor.Event) { l.n++ }
func (l *nilListener) OnRejected(executor.Event)  { l.n++ }

// A Listener holding a nil pointer would panic at every event, and the
// executor recovers a listener's panics without a word: New refuses it,
// naming the option, as it does a nil clock or limiter. A nil Listener
// means none, as before.
func TestWithListenerRefusesANilPointer(t *testing.T) {
	p, err := policy.New()
	if err != nil {
		t.Fatal(err)
	}
	_, err = executor.New(p, executor.WithListener((*nilListener)(nil)))
	if err == nil {
		t.Fatal("WithListener((*nilListener)(nil)): New succeeded")
	}
	if !strings.Contains(err.Error(), "WithListener") {
		t.Errorf("the error %q does not name WithListener", err)
	}
	ex, err := executor.New(p, executor.WithListener(nil))
	if err != nil {
		t.Fatalf("WithListener(nil): %v", err)
	}
	ex.Close()
}

// A clock holding a nil pointer (a nil *clock.Fake, declared and never
// made) would panic in New, which reads it, with no word of which option:
// New refuses it, naming the option and the value.
func TestWithClockRefusesANilPointer(t *testing.T) {
	p, err := policy.New()
	if err != nil {
		t.Fatal(err)
	}
	var fake *clock.Fake
	var ex *executor.Executor
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("WithClock((*clock.Fake)(nil)): New panicked: %v", r)
			}
		}()
		ex, err = executor.New(p, executor.WithClock(fake))
	}()
	if err == nil {
		ex.Close()
		t.Fatal("WithClock((*clock.Fake)(nil)): New succeeded")
	}
	if !strings.Contains(err.Error(), "WithClock") || !strings.Contains(err.Error(), "*clock.Fake") {
		t.Errorf("the error %q does not name WithClock and the value", err)
	}
}

// A clock holding a nil function, map, slice or channel is refused as a
// nil pointer is, naming the option and the value; the same kinds, not
// nil, are clocks like any other.
func TestWithClockRefusesTypedNils(t *testing.T) {
	p, err := policy.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range clocktest.Nils() {
		var ex *executor.Executor
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
				}
			}()
			ex, err = executor.New(p, executor.WithClock(c))
		}()
		if err == nil {
			ex.Close()
			t.Errorf("WithClock(%T(nil)): New succeeded", c)
			continue
		}
		if want := fmt.Sprintf("WithClock((%T)(nil))", c); !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not name %s", err, want)
		}
	}
	for _, c := range clocktest.At(time.Now()) {
		ex, err := executor.New(p, executor.WithClock(c))
		if err != nil {
			t.Errorf("WithClock(%T): %v", c, err)
			continue
		}
		ex.Close()
	}
}
