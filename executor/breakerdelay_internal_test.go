package executor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/policy"
)

// BreakerRemainingDelay answers a server that refuses a request for an
// open breaker, on every such refusal: it takes no lock of the group's, so
// that it answers while the group is locked, as GroupStats does not.
func TestBreakerRemainingDelayTakesNoGroupLock(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	p, _ := policy.New()
	ex, err := New(p, WithClock(clk), WithGroupBreaker(breaker.Settings{
		Timeout: time.Minute, ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	ctx := context.Background()
	if d := ex.BreakerRemainingDelay("g"); d != 0 {
		t.Fatalf("no group yet: %v, want 0", d)
	}
	if err := ex.Do(ctx, "g", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if d := ex.BreakerRemainingDelay("g"); d != 0 {
		t.Fatalf("closed breaker: %v, want 0", d)
	}
	if err := ex.Do(ctx, "g", func(context.Context) error { return errors.New("down") }); err == nil {
		t.Fatal("the failing call succeeded")
	}
	clk.Advance(20 * time.Second)
	if err := ex.Do(ctx, "g", func(context.Context) error { return nil }); !errors.Is(err, breaker.ErrOpenState) {
		t.Fatalf("err = %v, want the open breaker's refusal", err)
	}
	g := ex.groups.load("g")
	g.mu.Lock()
	got := make(chan time.Duration, 1)
	go func() { got <- ex.BreakerRemainingDelay("g") }()
	select {
	case d := <-got:
		if d != 40*time.Second {
			t.Errorf("open breaker 20s into its 1m: %v, want 40s", d)
		}
	case <-time.After(10 * time.Second):
		t.Error("BreakerRemainingDelay waited for the group's lock")
		g.mu.Unlock()
		<-got // the goroutine ends once the lock is free
		return
	}
	g.mu.Unlock()
}
