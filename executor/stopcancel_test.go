package executor_test

import (
	"context"
	"errors"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// A running task whose context a group stop has cancelled (ShutdownGroup
// out of time) was already cancelled: a later Cancel reports false, whether
// Fn watched its context through Done or polled Err.
func TestCancelAfterGroupStopReportsFalse(t *testing.T) {
	for _, useDone := range []bool{true, false} {
		name := "polls Err"
		if useDone {
			name = "waits on Done"
		}
		t.Run(name, func(t *testing.T) {
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
			started, seen, read, release := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
			closeAtEnd(t, seen)
			closeAtEnd(t, release)
			h := submit(t, ex, executor.Task[int]{Group: "g", Fn: func(ctx context.Context) (int, error) {
				if useDone {
					_ = ctx.Done()
				}
				close(started)
				<-seen
				err := ctx.Err()
				close(read)
				<-release
				return 0, err
			}})
			recv(t, started, "the task started")
			ended, cancel := context.WithCancel(bg)
			cancel()
			if err := ex.ShutdownGroup(ended, "g"); err == nil {
				t.Fatal("ShutdownGroup with an ended context returned nil")
			}
			close(seen)
			recv(t, read, "the task read its context's error")
			if h.Cancel() {
				t.Error("Cancel after the group's stop cancelled the task reported true")
			}
			close(release)
			if r := wait(t, h); r.Status != executor.Cancelled {
				t.Errorf("result %+v, want Cancelled (the stop reached Fn)", r)
			}
		})
	}
}

// A Cancel after a group stop has cancelled a running task's context does
// not change the context's cause: context.Cause still reports the stop's,
// as a standard context keeps the cause of its first cancel.
func TestCancelAfterGroupStopKeepsItsCause(t *testing.T) {
	for _, useDone := range []bool{true, false} {
		name := "polls Err"
		if useDone {
			name = "waits on Done"
		}
		t.Run(name, func(t *testing.T) {
			ex := newExec(t, nil)
			started, cancelled := make(chan struct{}), make(chan struct{})
			closeAtEnd(t, cancelled)
			h := submit(t, ex, executor.Task[error]{Group: "g", Fn: func(ctx context.Context) (error, error) {
				if useDone {
					_ = ctx.Done()
				}
				close(started)
				<-cancelled
				return context.Cause(ctx), nil
			}})
			recv(t, started, "the task started")
			ex.ShutdownGroup(done(), "g")
			h.Cancel()
			close(cancelled)
			if r := wait(t, h); !errors.Is(r.Value, executor.ErrGroupShutdown) {
				t.Errorf("context.Cause after the stop and a Cancel: %v, want the stop's cause", r.Value)
			}
		})
	}
}
