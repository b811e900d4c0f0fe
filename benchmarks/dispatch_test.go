package benchmarks

import (
	"context"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// The dispatch cost with many groups waiting: global limit 8, concurrency 1
// per group, batches of 100,000 tiny tasks over G groups (task i to group
// i%G). Before each batch a blocker task takes all 8 global permits, the
// whole batch is submitted (so it all waits, G groups deep in ex.ready),
// then the blocker returns and the batch drains through dispatch. One op is
// ONE TASK: ns/op is submit + dispatch + run + wait per task. With G=10,000
// each group has 10 tasks per batch, so about 10,000 groups wait for global
// room for most of the batch; with G=10, 10 groups wait with 10,000 each.
//
// This file uses only the executor's API as it was before fair dispatch, so
// it can be run against the old tree for a before/after comparison.

const dispatchGlobal = 8

type backlogRunner struct {
	ex   *executor.Executor
	keys []string
	fn   func(context.Context) (struct{}, error)
	hs   []*executor.Handle[struct{}]
}

func newBacklogRunner(c *counter, groups int) (*backlogRunner, error) {
	p, err := policy.New(
		policy.WithGlobalMaxInFlight(dispatchGlobal),
		policy.WithDefaultMaxConcurrency(1),
		policy.WithDefaultMaxInFlight(policy.Unlimited),
		policy.WithGroupMaxConcurrency("blocker", dispatchGlobal),
	)
	if err != nil {
		return nil, err
	}
	// Keep every group's state between batches, so that a batch measures
	// dispatch, not the creation of 10,000 groups.
	ex, err := executor.New(p, executor.WithMaxIdleGroups(2*groups))
	if err != nil {
		return nil, err
	}
	return &backlogRunner{
		ex:   ex,
		keys: groupKeys(groups),
		fn:   func(context.Context) (struct{}, error) { c.tiny(); return struct{}{}, nil },
		hs:   make([]*executor.Handle[struct{}], 0, batch),
	}, nil
}

func (r *backlogRunner) run(n int) error {
	ctx := context.Background()
	started, release := make(chan struct{}), make(chan struct{})
	blocker, err := executor.Submit(r.ex, ctx, executor.Task[struct{}]{Group: "blocker", Weight: dispatchGlobal,
		Fn: func(context.Context) (struct{}, error) { close(started); <-release; return struct{}{}, nil }})
	if err != nil {
		return err
	}
	<-started
	hs, err := submitAll(r.ex, r.keys, r.fn, r.hs[:0], n)
	close(release)
	if _, werr := blocker.Wait(ctx); werr != nil && err == nil {
		err = werr
	}
	r.hs = waitAll(hs, &err)
	return err
}

func (r *backlogRunner) close() error { return r.ex.Close() }

var dispatchPeers = []peerCase{
	{"groups-10", func(c *counter) (runner, error) { return newBacklogRunner(c, 10) }},
	{"groups-10000", func(c *counter) (runner, error) { return newBacklogRunner(c, 10_000) }},
}

func BenchmarkDispatch(b *testing.B) {
	for _, pc := range dispatchPeers {
		b.Run(pc.name, func(b *testing.B) { benchRunner(b, pc) })
	}
}

func TestDispatchRunners(t *testing.T) { testRunners(t, dispatchPeers, dispatchGlobal) }
