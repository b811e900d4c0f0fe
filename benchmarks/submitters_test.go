package benchmarks

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/groupexec/groupexec/executor"
)

// The grouped workload with several submitting goroutines, as a server
// submits from its request handlers: each of GOMAXPROCS goroutines submits
// its share of a batch (task i of a share to group (i+s)%1000) and then
// waits for its own handles. The single-submitter workloads have one
// goroutine admitting at a time; here the submitters compete with each
// other and with the finishing workers.
//
// One benchmark op is ONE TASK.

// submitterCount is the number of submitting goroutines: one per P.
func submitterCount() int { return runtime.GOMAXPROCS(0) }

// shares calls submit(s, k) on submitterCount goroutines, s's share of n
// being k tasks, and waits for them; it returns the first error.
func shares(n int, submit func(s, k int) error) error {
	m := submitterCount()
	errs := make([]error, m)
	var wg sync.WaitGroup
	for s := range m {
		k := n / m
		if s < n%m {
			k++
		}
		wg.Go(func() { errs[s] = submit(s, k) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

type oursSubmitters struct {
	ex   *executor.Executor
	keys []string
	fn   func(context.Context) (struct{}, error)
	hs   [][]*executor.Handle[struct{}] // per submitter, reused from batch to batch
}

func (r *oursSubmitters) run(n int) error {
	if len(r.hs) != submitterCount() {
		r.hs = make([][]*executor.Handle[struct{}], submitterCount())
	}
	return shares(n, func(s, k int) error {
		hs := r.hs[s][:0]
		t := inTurn{s % len(r.keys), len(r.keys)}
		var err error
		for i := range k {
			h, serr := executor.Submit(r.ex, context.Background(),
				executor.Task[struct{}]{Group: r.keys[t.next()], Fn: r.fn})
			if serr != nil {
				err = fmt.Errorf("submitter %d, submit %d: %w", s, i, serr)
				break
			}
			hs = append(hs, h)
		}
		r.hs[s] = waitAll(hs, &err)
		return err
	})
}

func (r *oursSubmitters) close() error { return r.ex.Close() }

// oursGoSubmitters is oursSubmitters with Executor.Go: each submitter
// goroutine adds its share to one WaitGroup, which the tasks count down.
type oursGoSubmitters struct {
	*oursGoRunner
}

func (r *oursGoSubmitters) run(n int) error {
	r.wg.Add(n)
	err := shares(n, func(s, k int) error {
		t := inTurn{s % len(r.keys), len(r.keys)}
		for i := range k {
			if err := r.ex.Go(context.Background(), r.keys[t.next()], r.task); err != nil {
				r.wg.Add(-(k - i))
				return fmt.Errorf("submitter %d, go %d: %w", s, i, err)
			}
		}
		return nil
	})
	r.wg.Wait()
	return err
}

// pondSubmitters is pond's subpools (a parent of 256, one subpool of 4 per
// group) fed by the submitters with Go, counted down on one WaitGroup.
type pondSubmitters struct {
	*pondRunner
}

func (r *pondSubmitters) run(n int) error {
	r.wg.Add(n)
	err := shares(n, func(s, k int) error {
		t := inTurn{s % len(r.pools), len(r.pools)}
		for i := range k {
			if err := r.pools[t.next()].Go(r.goTask); err != nil {
				r.wg.Add(-(k - i))
				return fmt.Errorf("submitter %d, pond go %d: %w", s, i, err)
			}
		}
		return nil
	})
	r.wg.Wait()
	return err
}

var submittersPeers = []peerCase{
	{"ours", func(c *counter) (runner, error) {
		o, err := newOurs(c, groupedKeys, groupedGlobal, groupedConc, 0)
		if err != nil {
			return nil, err
		}
		return &oursSubmitters{ex: o.ex, keys: o.keys, fn: o.fn}, nil
	}},
	{"ours-go", func(c *counter) (runner, error) {
		o, err := newOursGo(c, groupedKeys, groupedGlobal, groupedConc)
		if err != nil {
			return nil, err
		}
		return &oursGoSubmitters{o}, nil
	}},
	// x/sync's runner starts a goroutine per task from one loop: with a
	// goroutine per task, more submitters would only add goroutines.
	{"xsync-group-first", func(c *counter) (runner, error) {
		return newXsync(c, groupedKeys, groupedGlobal, groupedConc, false), nil
	}},
	{"pond-subpools-go", func(c *counter) (runner, error) {
		return &pondSubmitters{newPond(c, groupedGlobal, groupedGroups, groupedConc, true)}, nil
	}},
}

func BenchmarkGroupedSubmitters(b *testing.B) {
	for _, pc := range submittersPeers {
		b.Run(pc.name, func(b *testing.B) { benchRunner(b, pc) })
	}
}
