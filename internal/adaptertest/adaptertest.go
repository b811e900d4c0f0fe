// Package adaptertest holds what the adapters' tests (httpadmit, grpcadmit,
// metrics/prom, metrics/otel) share: the check that the core packages
// import only the standard library and this module, a poll for states no
// event announces, a group's only slot held, a context whose deadline
// passes on cue, one whose methods panic, a task refused by its breaker as
// it would start (RefuseQueuedByBreaker), and a workload that sends tasks
// down every path a task can take (EveryPath).
package adaptertest

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
)

const module = "github.com/groupexec/groupexec/"

// Core are the packages that must import only the standard library and
// this module, so that net/http's test helpers, gRPC and OpenTelemetry stay
// in the adapters.
var Core = []string{module + "executor", module + "policy", module + "outcome", module + "bulkhead", module + "breaker", module + "clock", module + "internal/..."}

// CheckCoreDeps fails t for every package outside the standard library and
// this module that a core package depends on.
func CheckCoreDeps(t *testing.T) {
	t.Helper()
	args := append([]string{"list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}"}, Core...)
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if !strings.HasPrefix(dep, module) {
			t.Errorf("a core package depends on %s", dep)
		}
	}
}

// Eventually polls cond, a state that no event announces (a request queued:
// the executor's Submitted event comes before its admission), and fails t
// after a bound that only a bug exceeds.
func Eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// FillSlot occupies group's only slot with a Do call until the returned
// func is called.
func FillSlot(t *testing.T, ex *executor.Executor, group string) (free func()) {
	t.Helper()
	in, out := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = ex.Do(context.Background(), group, func(context.Context) error {
			close(in)
			<-out
			return nil
		})
	}()
	<-in
	return func() { close(out); <-done }
}

// Expiring is a context whose deadline passes when Expire is called: a
// deadline that passes at a point the test chooses (while a listener is
// told of a start, once a call is queued), with no clock to move.
type Expiring struct {
	context.Context
	done chan struct{}
}

// NewExpiring returns an Expiring context whose deadline has not passed.
func NewExpiring() *Expiring {
	return &Expiring{Context: context.Background(), done: make(chan struct{})}
}

// Expire makes the deadline pass. It must be called once.
func (c *Expiring) Expire() { close(c.done) }

// Over returns the same deadline over parent, whose values it carries: a
// call's context (its metadata, its peer) that passes its deadline when c
// does.
func (c *Expiring) Over(parent context.Context) *Expiring {
	return &Expiring{Context: parent, done: c.done}
}

func (c *Expiring) Done() <-chan struct{} { return c.done }

func (c *Expiring) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// Panicking is a context that never ends and whose method named Method
// (Done, Err or Value) panics with Panic, as a faulty context of the
// caller's may, on whichever goroutine calls it.
type Panicking struct {
	Method string
	Panic  any
}

var never = make(chan struct{})

func (c *Panicking) Deadline() (time.Time, bool) { return time.Time{}, false }

func (c *Panicking) Done() <-chan struct{} {
	if c.Method == "Done" {
		panic(c.Panic)
	}
	return never
}

func (c *Panicking) Err() error {
	if c.Method == "Err" {
		panic(c.Panic)
	}
	return nil
}

func (c *Panicking) Value(any) any {
	if c.Method == "Value" {
		panic(c.Panic)
	}
	return nil
}

// RunElsewhere is a rejection handler (executor.WithRejectionHandler) that
// runs the refused work in its caller's stead on a goroutine of its own
// (Rejection.RunInCaller), and waits for it: work on a goroutine the
// adapter does not own.
func RunElsewhere(r *executor.Rejection) error {
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		r.RunInCaller()
	}()
	<-ran
	return nil
}
