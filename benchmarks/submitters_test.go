package benchmarks

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/groupexec/groupexec/executor"
)

// The grouped workload with several submitting goroutines, as a server
// submits from its request handlers: each of submitters goroutines submits
// its share of a batch (task i of a share to group (i+s)%1000) and then
// waits for its own handles. The single-submitter workloads leave the
// executor's lock to one Submit at a time; here submitters compete for it
// with each other and with the finishing workers, so that a change to how
// the lock is shared shows what it costs the workers too.
//
// One benchmark op is ONE TASK.

const submitters = 8

type oursSubmitters struct {
	ex   *executor.Executor
	keys []string
	fn   func(context.Context) (struct{}, error)
	hs   [submitters][]*executor.Handle[struct{}]
}

func (r *oursSubmitters) run(n int) error {
	errs := make([]error, submitters)
	var wg sync.WaitGroup
	for s := range submitters {
		k := n / submitters
		if s < n%submitters {
			k++
		}
		wg.Go(func() {
			hs := r.hs[s][:0]
			t := inTurn{s % len(r.keys), len(r.keys)}
			for i := range k {
				h, err := executor.Submit(r.ex, context.Background(),
					executor.Task[struct{}]{Group: r.keys[t.next()], Fn: r.fn})
				if err != nil {
					errs[s] = fmt.Errorf("submitter %d, submit %d: %w", s, i, err)
					break
				}
				hs = append(hs, h)
			}
			r.hs[s] = waitAll(hs, &errs[s])
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *oursSubmitters) close() error { return r.ex.Close() }

// oursGoSubmitters is oursSubmitters with Executor.Go: each submitter
// goroutine adds its share to one WaitGroup, which the tasks count down.
type oursGoSubmitters struct {
	*oursGoRunner
}

func (r *oursGoSubmitters) run(n int) error {
	errs := make([]error, submitters)
	var wg sync.WaitGroup
	r.wg.Add(n)
	for s := range submitters {
		k := n / submitters
		if s < n%submitters {
			k++
		}
		wg.Go(func() {
			t := inTurn{s % len(r.keys), len(r.keys)}
			for i := range k {
				if err := r.ex.Go(context.Background(), r.keys[t.next()], r.task); err != nil {
					errs[s] = fmt.Errorf("submitter %d, go %d: %w", s, i, err)
					r.wg.Add(-(k - i))
					break
				}
			}
		})
	}
	wg.Wait()
	r.wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
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
}

func BenchmarkGroupedSubmitters(b *testing.B) {
	for _, pc := range submittersPeers {
		b.Run(pc.name, func(b *testing.B) { benchRunner(b, pc) })
	}
}
