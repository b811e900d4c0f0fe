package executor_test

import (
	"context"
	"errors"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

func TestDoReturnsFnsError(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithMaxConcurrencyPerGroup(1)})
	want := errors.New("boom")
	if err := ex.Do(context.Background(), "g", func(context.Context) error { return want }); err != want {
		t.Fatalf("Do = %v, want %v", err, want)
	}
	if err := ex.Do(context.Background(), "g", func(context.Context) error { return nil }); err != nil {
		t.Fatalf("Do = %v, want nil", err)
	}
}

func TestDoRefusesUnderEveryPolicy(t *testing.T) {
	for _, rp := range []policy.RejectionPolicy{policy.Abort, policy.Discard, policy.DiscardOldest} {
		t.Run(rp.String(), func(t *testing.T) {
			ex := newExec(t, []policy.Option{policy.WithMaxInFlightPerGroup(1), policy.WithRejectionPolicy(rp)})
			hold := make(chan struct{})
			running := make(chan struct{})
			go ex.Do(context.Background(), "g", func(context.Context) error { close(running); <-hold; return nil })
			<-running
			ran := false
			err := ex.Do(context.Background(), "g", func(context.Context) error { ran = true; return nil })
			close(hold)
			if ran || !errors.Is(err, executor.ErrRejected) {
				t.Fatalf("Do on a full group: ran %v, err %v; want not run and ErrRejected", ran, err)
			}
		})
	}
}

func TestDoRepanics(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithMaxConcurrencyPerGroup(1)})
	func() {
		defer func() {
			if r := recover(); r != "oops" {
				t.Fatalf("recovered %v, want oops", r)
			}
		}()
		ex.Do(context.Background(), "g", func(context.Context) error { panic("oops") })
	}()
	if err := ex.Do(context.Background(), "g", func(context.Context) error { return nil }); err != nil {
		t.Fatalf("Do after a panic = %v: the permit was not released", err)
	}
}
