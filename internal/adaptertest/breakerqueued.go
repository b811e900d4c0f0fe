package adaptertest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/executor"
)

// TrippingBreaker is a group breaker that opens at its first failure and
// stays open (its clock never moves).
func TrippingBreaker() executor.Option {
	return executor.WithGroupBreaker(breaker.Settings{
		Clock: clock.NewFake(time.Unix(0, 0)), ReadyToTrip: func(n breaker.Counts) bool { return n.ConsecutiveFailures >= 1 }})
}

// RefuseQueuedByBreaker has group's breaker (TrippingBreaker, the group
// running one task at a time) refuse a task as it would start: a Do call
// holds the group and fails once a second one has queued behind it, which
// must then return a refusal by the breaker, its function never run.
func RefuseQueuedByBreaker(t *testing.T, ex *executor.Executor, group string) {
	t.Helper()
	entered, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- ex.Do(context.Background(), group, func(context.Context) error {
			close(entered)
			<-release
			return errors.New("boom")
		})
	}()
	<-entered
	var ran atomic.Bool
	queued := make(chan error, 1)
	go func() {
		queued <- ex.Do(context.Background(), group, func(context.Context) error { ran.Store(true); return nil })
	}()
	Eventually(t, "the second task queued", func() bool { s, _ := ex.GroupStats(group); return s.Waiting == 1 })
	close(release)
	<-first
	var re *executor.RejectedError
	select {
	case err := <-queued:
		if !errors.As(err, &re) || re.Limit != executor.LimitBreaker || ran.Load() {
			t.Fatalf("queued Do: %v (ran %v), want a refusal by the open breaker", err, ran.Load())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the queued Do did not return within 10s")
	}
}
