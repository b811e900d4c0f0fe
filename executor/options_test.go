package executor_test

import (
	"strings"
	"testing"

	"github.com/groupexec/groupexec/executor"
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
