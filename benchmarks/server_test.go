package benchmarks

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/alitto/pond/v2"
	"golang.org/x/sync/semaphore"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// The server workload: request goroutines, each admitting one piece of
// work for one tenant, running it, and waiting for it, as a service's
// handlers do. serverCallersPerP callers per P (b.SetParallelism), each
// going round the tenants from its own starting point; each request runs
// spinServer (~0.5 µs) under a tenant's limit of serverPerTenant and a
// global limit of serverGlobal. One benchmark op is one request.
const (
	serverTenants     = 1000
	serverPerTenant   = 4
	serverGlobal      = 256
	serverCallersPerP = 16
)

// serverPeer is one contender: new returns the request (admit, run fn,
// wait) and a function that releases the contender. fn is given once, so
// that a request allocates only what the contender does.
type serverPeer struct {
	name string
	new  func(fn func()) (call func(ctx context.Context, tenant string) error, release func(), err error)
}

var serverPeers = []serverPeer{
	{"do", func(fn func()) (func(context.Context, string) error, func(), error) {
		ex, err := serverExecutor()
		if err != nil {
			return nil, nil, err
		}
		do := func(context.Context) error { fn(); return nil }
		return func(ctx context.Context, tenant string) error {
			return ex.Do(ctx, tenant, do)
		}, func() { ex.Close() }, nil
	}},
	{"do-ctx", func(fn func()) (func(context.Context, string) error, func(), error) {
		// Do with a context that can be cancelled, as a handler's request
		// context is: its task is allocated (context.Background's is
		// reused).
		ex, err := serverExecutor()
		if err != nil {
			return nil, nil, err
		}
		reqCtx, cancel := context.WithCancel(context.Background())
		do := func(context.Context) error { fn(); return nil }
		return func(_ context.Context, tenant string) error {
			return ex.Do(reqCtx, tenant, do)
		}, func() { cancel(); ex.Close() }, nil
	}},
	{"submit-wait", func(fn func()) (func(context.Context, string) error, func(), error) {
		ex, err := serverExecutor()
		if err != nil {
			return nil, nil, err
		}
		task := func(context.Context) (struct{}, error) { fn(); return struct{}{}, nil }
		return func(ctx context.Context, tenant string) error {
			h, err := executor.Submit(ex, ctx, executor.Task[struct{}]{Group: tenant, Fn: task})
			if err != nil {
				return err
			}
			r, err := h.Wait(ctx)
			if err == nil && r.Status != executor.Success {
				err = r.Err
			}
			return err
		}, func() { ex.Close() }, nil
	}},
	{"xsync", func(fn func()) (func(context.Context, string) error, func(), error) {
		// What a Go user writes in ten lines: a semaphore per tenant in a
		// sync.Map and a global one, acquired in that order, the work run
		// inline.
		global := semaphore.NewWeighted(serverGlobal)
		var tenants sync.Map
		return func(ctx context.Context, tenant string) error {
			v, ok := tenants.Load(tenant)
			if !ok {
				v, _ = tenants.LoadOrStore(tenant, semaphore.NewWeighted(serverPerTenant))
			}
			sem := v.(*semaphore.Weighted)
			if err := sem.Acquire(ctx, 1); err != nil {
				return err
			}
			defer sem.Release(1)
			if err := global.Acquire(ctx, 1); err != nil {
				return err
			}
			defer global.Release(1)
			fn()
			return nil
		}, func() {}, nil
	}},
	{"pond-subpools", func(fn func()) (func(context.Context, string) error, func(), error) {
		pool := pond.NewPool(serverGlobal)
		var tenants sync.Map
		return func(ctx context.Context, tenant string) error {
			v, ok := tenants.Load(tenant)
			if !ok {
				v, _ = tenants.LoadOrStore(tenant, pool.NewSubpool(serverPerTenant))
			}
			return v.(pond.Pool).Submit(fn).Wait()
		}, pool.StopAndWait, nil
	}},
}

func serverExecutor() (*executor.Executor, error) {
	p, err := policy.New(
		policy.WithGlobalMaxInFlight(serverGlobal),
		policy.WithDefaultMaxConcurrency(serverPerTenant),
		policy.WithDefaultMaxInFlight(policy.Unlimited),
	)
	if err != nil {
		return nil, err
	}
	return executor.New(p)
}

func BenchmarkServer(b *testing.B) {
	keys := groupKeys(serverTenants)
	for _, pc := range serverPeers {
		b.Run(pc.name, func(b *testing.B) {
			call, release, err := pc.new(func() { work(spinServer) })
			if err != nil {
				b.Fatal(err)
			}
			defer release()
			runCallers(b, keys, call)
		})
	}
}

// runCallers runs the server's callers, serverCallersPerP per P, each
// calling call for one key after another from its own starting point, and
// fails b with the first error a call returns.
func runCallers(b *testing.B, keys []string, call func(ctx context.Context, key string) error) {
	var starts atomic.Int64
	var failed atomic.Pointer[error]
	b.SetParallelism(serverCallersPerP)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		i := int(starts.Add(1)*7919) % len(keys)
		for pb.Next() {
			if err := call(ctx, keys[i]); err != nil {
				e := err // a copy escapes, not the loop's variable
				failed.CompareAndSwap(nil, &e)
				return
			}
			if i++; i == len(keys) {
				i = 0
			}
		}
	})
	b.StopTimer()
	if e := failed.Load(); e != nil {
		b.Fatal(*e)
	}
}
