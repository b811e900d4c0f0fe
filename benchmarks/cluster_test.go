package benchmarks

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/cluster/redislimit/redistest"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
	"github.com/redis/go-redis/v9"
)

// Cluster limits: tasks per second through the Redis-backed limiter
// (cluster/redislimit) against the same executor with local limits only,
// and Redis round trips per task.
//
// Workload: tiny tasks (one atomic add), 8 groups, submitted round robin by
// batches of 10,000 (submit all, wait for all). Every executor has the same
// local limits: global 64, 16 running per group. The cluster variants add a
// group limiter of 16 per group and a global limiter of 64, shared by 1 or
// 3 executors. The 3 "processes" are three executors in this process, each
// with its own holder and Redis connection (its own leases and renewal
// loop); separate OS processes do not fit a Go benchmark, cmd/clusterbench
// runs this workload in real processes. With 3 executors sharing 16 per
// group, each gets a part of the cluster limit, so the cluster limit, not
// the local one, is what binds.
//
// One op is ONE TASK. tasks/s and rt/task (Redis round trips per task:
// refills, returns, renewals, all counted by the holders) are reported.

const (
	clusterGroups   = 8
	clusterPerGroup = 16
	clusterGlobal   = 64
	clusterBatch    = 10_000
)

// fleet is a benchmark's executors and, for the cluster variants, their
// holders and Redis clients: "processes" in one process.
type fleet struct {
	exs     []*executor.Executor
	holders []*redislimit.Holder
	clients []*redis.Client
}

func (f *fleet) close() {
	for _, ex := range f.exs {
		ex.Close()
	}
	for _, h := range f.holders {
		h.Close()
	}
	for _, c := range f.clients {
		c.Close()
	}
}

type clusterRig struct {
	fleet
	keys []string
	n    atomic.Int64
}

// newClusterRig builds k executors; with addr empty they have local limits
// only, else each has its own holder on the Redis at addr.
func newClusterRig(tb testing.TB, addr, prefix string, k int) *clusterRig {
	tb.Helper()
	r := &clusterRig{}
	for i := range clusterGroups {
		r.keys = append(r.keys, fmt.Sprint("g", i))
	}
	p, err := policy.New(policy.WithGlobalMaxInFlight(clusterGlobal), policy.WithDefaultMaxConcurrency(clusterPerGroup),
		policy.WithDefaultMaxInFlight(policy.Unlimited))
	if err != nil {
		tb.Fatal(err)
	}
	for range k {
		var opts []executor.Option
		if addr != "" {
			c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true})
			h, err := redislimit.New(c, redislimit.WithPrefix(prefix))
			if err != nil {
				tb.Fatal(err)
			}
			r.clients, r.holders = append(r.clients, c), append(r.holders, h)
			opts = append(opts, executor.WithGroupLimiter(h.Groups(clusterPerGroup)), executor.WithGlobalLimiter(h.Global(clusterGlobal)))
		}
		ex, err := executor.New(p, opts...)
		if err != nil {
			tb.Fatal(err)
		}
		r.exs = append(r.exs, ex)
	}
	return r
}

func (r *clusterRig) roundTrips() (n uint64) {
	for _, h := range r.holders {
		n += h.Stats().RoundTrips
	}
	return n
}

// run submits k tasks round robin over groups and executors, then waits for
// all of them.
func (r *clusterRig) run(tb testing.TB, k int) {
	fn := func(context.Context) (struct{}, error) { r.n.Add(1); return struct{}{}, nil }
	hs := make([]*executor.Handle[struct{}], k)
	for i := range k {
		h, err := executor.Submit(r.exs[i%len(r.exs)], context.Background(),
			executor.Task[struct{}]{Group: r.keys[i%len(r.keys)], Fn: fn})
		if err != nil {
			tb.Fatalf("Submit: %v", err)
		}
		hs[i] = h
	}
	for _, h := range hs {
		if res, _ := h.Wait(context.Background()); res.Status != executor.Success {
			tb.Fatalf("task: %v %v", res.Status, res.Err)
		}
	}
}

func BenchmarkClusterLimit(b *testing.B) {
	srv := redistest.Start(b)
	for _, c := range []struct {
		name string
		addr string
		k    int
	}{
		{"local-only", "", 1},
		{"redis-1-executor", srv.Addr(), 1},
		{"redis-3-executors", srv.Addr(), 3},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := newClusterRig(b, c.addr, "bench:"+b.Name(), c.k)
			defer r.close()
			r.run(b, clusterBatch) // warm up: leases held, workers parked
			trips := r.roundTrips()
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for left := b.N; left > 0; left -= clusterBatch {
				r.run(b, min(left, clusterBatch))
			}
			el := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/el.Seconds(), "tasks/s")
			b.ReportMetric(float64(r.roundTrips()-trips)/float64(b.N), "rt/task")
		})
	}
}

// TestClusterRoundTripsPerTask checks the point of block leasing: at steady
// load, three executors sharing cluster limits pay well under 0.1 Redis
// round trips per task, counted by the holders. (Under contention the cost
// is higher: BenchmarkClusterContention.)
func TestClusterRoundTripsPerTask(t *testing.T) {
	srv := redistest.Start(t)
	r := newClusterRig(t, srv.Addr(), "test:rt", 3)
	defer r.close()
	r.run(t, clusterBatch) // warm up
	trips := r.roundTrips()
	const tasks = 5 * clusterBatch
	for range tasks / clusterBatch {
		r.run(t, clusterBatch)
	}
	per := float64(r.roundTrips()-trips) / tasks
	t.Logf("%.4f round trips per task over %d tasks", per, tasks)
	if per >= 0.1 {
		t.Fatalf("%.4f Redis round trips per task at steady load, want well under 0.1", per)
	}
	if got := r.n.Load(); got != tasks+clusterBatch {
		t.Fatalf("%d tasks ran, want %d", got, tasks+clusterBatch)
	}
}
