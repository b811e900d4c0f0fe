package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/alitto/pond/v2"
	fsbulkhead "github.com/failsafe-go/failsafe-go/bulkhead"
	"golang.org/x/sync/semaphore"

	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// The overload workload: every tenant is full (an in-flight limit of one,
// held by one goroutine that does not finish while the benchmark runs, as
// a request in a service does), and the server workload's callers keep
// asking: every call is refused. What a refusal costs is what an
// overloaded service pays per request it sheds. Each contender finds its
// tenant's limiter as a service would, by key. One benchmark op is one
// refused call.
const overloadTenants = serverTenants

// overloadPeer is one contender: new fills every tenant and returns the
// refused call (nil error means the call was admitted: a failure) and a
// function that lets the held tasks end and releases the contender.
type overloadPeer struct {
	name string
	new  func(keys []string) (try func(ctx context.Context, tenant string) error, release func(), err error)
}

var errAdmitted = errors.New("admitted, though every tenant is full")

var overloadPeers = []overloadPeer{
	{"go", func(keys []string) (func(context.Context, string) error, func(), error) {
		ex, release, err := overloadExecutor(keys)
		fn := func(context.Context) error { return nil }
		return func(ctx context.Context, tenant string) error { return refusedOrNot(ex.Go(ctx, tenant, fn)) }, release, err
	}},
	{"submit", func(keys []string) (func(context.Context, string) error, func(), error) {
		ex, release, err := overloadExecutor(keys)
		fn := func(context.Context) (struct{}, error) { return struct{}{}, nil }
		return func(ctx context.Context, tenant string) error {
			_, err := executor.Submit(ex, ctx, executor.Task[struct{}]{Group: tenant, Fn: fn})
			return refusedOrNot(err)
		}, release, err
	}},
	{"do", func(keys []string) (func(context.Context, string) error, func(), error) {
		ex, release, err := overloadExecutor(keys)
		fn := func(context.Context) error { return nil }
		return func(ctx context.Context, tenant string) error { return refusedOrNot(ex.Do(ctx, tenant, fn)) }, release, err
	}},
	{"bulkhead", func(keys []string) (func(context.Context, string) error, func(), error) {
		var m sync.Map
		h := newHolders()
		for _, k := range keys {
			b, err := bulkhead.New(1)
			if err != nil {
				return nil, nil, err
			}
			m.Store(k, b)
			h.hold(func() bool { _, err := b.TryAcquire(context.Background(), 1); return err == nil })
		}
		return func(ctx context.Context, tenant string) error {
			v, _ := m.Load(tenant)
			if _, err := v.(*bulkhead.Bulkhead).TryAcquire(ctx, 1); err == nil {
				return errAdmitted
			}
			return nil
		}, h.release, h.err()
	}},
	{"xsync", func(keys []string) (func(context.Context, string) error, func(), error) {
		var m sync.Map
		h := newHolders()
		for _, k := range keys {
			s := semaphore.NewWeighted(1)
			m.Store(k, s)
			h.hold(func() bool { return s.TryAcquire(1) })
		}
		return func(ctx context.Context, tenant string) error {
			v, _ := m.Load(tenant)
			if v.(*semaphore.Weighted).TryAcquire(1) {
				return errAdmitted
			}
			return nil
		}, h.release, h.err()
	}},
	{"failsafe-bulkhead", func(keys []string) (func(context.Context, string) error, func(), error) {
		var m sync.Map
		h := newHolders()
		for _, k := range keys {
			b := fsbulkhead.New[any](1)
			m.Store(k, b)
			h.hold(b.TryAcquirePermit)
		}
		return func(ctx context.Context, tenant string) error {
			v, _ := m.Load(tenant)
			if v.(fsbulkhead.Bulkhead[any]).TryAcquirePermit() {
				return errAdmitted
			}
			return nil
		}, h.release, h.err()
	}},
	{"pond-trysubmit", func(keys []string) (func(context.Context, string) error, func(), error) {
		pool := pond.NewPool(2 * len(keys))
		hold := make(chan struct{})
		var m sync.Map
		for _, k := range keys {
			// pond queues without bound unless given a queue size, and a
			// size of 0 means no bound: the smallest full subpool is one
			// task running and one queued.
			sp := pool.NewSubpool(1, pond.WithQueueSize(1), pond.WithNonBlocking(true))
			running := make(chan struct{})
			sp.Go(func() { close(running); <-hold })
			<-running
			sp.Go(func() { <-hold })
			m.Store(k, sp)
		}
		fn := func() {}
		return func(ctx context.Context, tenant string) error {
			v, _ := m.Load(tenant)
			if _, ok := v.(pond.Pool).TrySubmit(fn); ok {
				return errAdmitted
			}
			return nil
		}, func() { close(hold); pool.StopAndWait() }, nil
	}},
}

// holders are the goroutines that hold every tenant's permit, one each,
// for the limiters that do not run the work themselves: each takes its
// permit and waits, as a request in flight does.
type holders struct {
	stop   chan struct{}
	wg     sync.WaitGroup
	failed atomic.Int64
}

func newHolders() *holders { return &holders{stop: make(chan struct{})} }

// hold starts a goroutine that takes a permit with acquire, then waits.
func (h *holders) hold(acquire func() bool) {
	got := make(chan struct{})
	h.wg.Go(func() {
		if !acquire() {
			h.failed.Add(1)
		}
		close(got)
		<-h.stop
	})
	<-got
}

func (h *holders) err() error {
	if h.failed.Load() != 0 {
		return errors.New("a holder found its tenant full")
	}
	return nil
}

func (h *holders) release() { close(h.stop); h.wg.Wait() }

// overloadExecutor returns an executor whose every tenant of keys holds
// its one in-flight permit until release.
func overloadExecutor(keys []string) (*executor.Executor, func(), error) {
	p, err := policy.New(policy.WithDefaultMaxInFlight(1))
	if err != nil {
		return nil, nil, err
	}
	ex, err := executor.New(p)
	if err != nil {
		return nil, nil, err
	}
	hold := make(chan struct{})
	for _, k := range keys {
		if err := ex.Go(context.Background(), k, func(context.Context) error { <-hold; return nil }); err != nil {
			return nil, nil, err
		}
	}
	if err := ex.Go(context.Background(), keys[0], func(context.Context) error { return nil }); !errors.Is(err, executor.ErrRejected) {
		return nil, nil, fmt.Errorf("a full tenant's call: %v, want a refusal", err)
	}
	return ex, func() { close(hold); ex.Close() }, nil
}

// refusedOrNot maps the refusal the benchmark expects to nil: every call is
// refused by construction, and the caller only needs to know that it was,
// as a caller that checks a TryAcquire's bool does. That the error is the
// executor's refusal is checked once, before the timing (overloadExecutor).
func refusedOrNot(err error) error {
	if err == nil {
		return errAdmitted
	}
	return nil
}

func BenchmarkOverload(b *testing.B) {
	keys := groupKeys(overloadTenants)
	for _, pc := range overloadPeers {
		b.Run(pc.name, func(b *testing.B) {
			try, release, err := pc.new(keys)
			if err != nil {
				b.Fatal(err)
			}
			defer release()
			runCallers(b, keys, try)
		})
	}
}
