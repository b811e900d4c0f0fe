package readme

// The README's snippets, each in a function that gives it the names it
// uses, so that they compile as the README shows them; the quick start,
// a whole program, is ./quickstart. TestSnippetsAreTheREADMEs checks that
// these are the README's text.

import (
	"context"
	"log"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/metrics/prom"
	"github.com/groupexec/groupexec/policy"
)

func build(context.Context, string) (string, error)           { return "", nil }
func write(context.Context, redislimit.Fence) (string, error) { return "", nil }

func submit(ctx context.Context, ex *executor.Executor) error {
	h, err := executor.Submit(ex, ctx, executor.Task[string]{
		Group: "tenant-42",
		Fn:    func(ctx context.Context) (string, error) { return build(ctx, "tenant-42") },
	})
	if err != nil {
		return err // refused: errors.Is(err, executor.ErrRejected)
	}
	res, err := h.Wait(ctx) // res.Status: Success, Failed, Cancelled or Rejected
	if err != nil {
		return err // ctx ended first; the task goes on (h.Cancel stops it)
	}
	_ = res
	return nil
}

func groupBreaker(p *policy.Policy) {
	ex, err := executor.New(p, executor.WithGroupBreaker(breaker.Settings{
		Timeout: 30 * time.Second, // open for 30s, then probe
		OnStateChange: func(group string, from, to breaker.State) {
			log.Printf("tenant %s: breaker %s -> %s", group, from, to)
		},
	}))
	if err != nil {
		log.Fatal(err)
	}
	_ = ex
}

func standaloneBulkhead(ctx context.Context) error {
	b, err := bulkhead.New(64, bulkhead.WithQueue(128, 500*time.Millisecond))
	if err != nil {
		return err
	}
	p, err := b.TryAcquire(ctx, 1)
	if err != nil {
		return err // ErrAtCapacity, ErrDraining, ...: shed the work
	}
	defer func() { _ = b.Release(p) }() // fails only for a permit released twice
	_ = p
	return nil
}

func adapters(ex, clientEx *executor.Executor, mux *http.ServeMux) {
	srv := &http.Server{Handler: httpadmit.Handler(ex, mux)}                                // X-Tenant by default
	client := &http.Client{Transport: httpadmit.Transport(clientEx, http.DefaultTransport)} // a bulkhead per host:port
	grpcSrv := grpc.NewServer(grpc.ChainUnaryInterceptor(grpcadmit.UnaryServerInterceptor(ex)))
	_, _, _ = srv, client, grpcSrv
}

func promCollector(p *policy.Policy) {
	c := prom.New(prom.Options{})
	ex, err := executor.New(p, executor.WithListener(c))
	if err != nil {
		log.Fatal(err)
	}
	c.Observe(ex)
	prometheus.MustRegister(c)
}

func clusterLimits(ctx context.Context, p *policy.Policy) error {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", MaxRetries: -1, ContextTimeoutEnabled: true})
	h, err := redislimit.New(rdb,
		redislimit.WithPrefix("api"),                        // holders sharing a prefix share limits
		redislimit.WithFailurePolicy(redislimit.FailClosed), // or FailOpen: local limits only while Redis is down
	)
	if err != nil {
		log.Fatal(err) // names the invalid option and value
	}
	defer h.Close() // after ex.Close
	ex, err := executor.New(p,
		executor.WithGlobalLimiter(h.Global(1000)), // 1000 running across the fleet
		executor.WithGroupLimiter(h.Groups(200)),   // 200 per tenant across the fleet
	)
	if err != nil {
		log.Fatal(err)
	}
	defer ex.Close() // deferred after h.Close, so it runs first
	hd, err := executor.Submit(ex, ctx, executor.Task[string]{Group: "tenant-42",
		Fn: func(ctx context.Context) (string, error) {
			if !redislimit.Valid(ctx) { // checked right before the write
				return "", redislimit.ErrLeaseLost // after a pause, ctx may not be cancelled yet
			}
			f, _ := redislimit.Fencing(ctx) // token and slots, for the downstream
			return write(ctx, f)
		}})
	if err != nil {
		return err // refused: errors.Is(err, executor.ErrRejected)
	}
	res, err := hd.Wait(ctx) // res.Value is write's answer; res.Err its error, or why the task did not run
	if err != nil {
		return err // ctx ended first; the task goes on
	}
	_ = res
	return nil
}
