package httpadmit_test

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// newExec builds an executor that the test closes when it ends.
func newExec(t testing.TB, popts []policy.Option, eopts ...executor.Option) *executor.Executor {
	t.Helper()
	p, err := policy.New(popts...)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(p, eopts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	return ex
}

// events turns listener calls into channels a test waits on, so it never
// sleeps to let the executor catch up. Each channel is buffered for the
// whole test.
type events struct {
	submitted, started, completed, rejected chan executor.Event
}

func newEvents() *events {
	return &events{make(chan executor.Event, 1000), make(chan executor.Event, 1000),
		make(chan executor.Event, 1000), make(chan executor.Event, 1000)}
}

func (e *events) listener() executor.Option {
	return executor.WithListener(executor.ListenerFuncs{
		Submitted: func(ev executor.Event) { e.submitted <- ev },
		Started:   func(ev executor.Event) { e.started <- ev },
		Completed: func(ev executor.Event) { e.completed <- ev },
		Rejected:  func(ev executor.Event) { e.rejected <- ev },
	})
}

// next returns the next event of ch.
func next(t *testing.T, ch chan executor.Event) executor.Event {
	t.Helper()
	return <-ch
}

// gate is a handler that counts the requests running in it, records the
// most seen at once, and holds each until release, or until the test ends
// (so that a test that fails while requests are held does not hang in its
// server's Close).
type gate struct {
	running, max, served atomic.Int64
	entered              chan string // the tenant of each request that entered
	hold                 chan struct{}
	end                  <-chan struct{}
	once                 sync.Once
}

func newGate(t *testing.T) *gate {
	return &gate{entered: make(chan string, 1000), hold: make(chan struct{}), end: t.Context().Done()}
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := g.running.Add(1)
	for {
		m := g.max.Load()
		if n <= m || g.max.CompareAndSwap(m, n) {
			break
		}
	}
	g.entered <- r.Header.Get("X-Tenant")
	select {
	case <-g.hold:
	case <-g.end:
	}
	g.running.Add(-1)
	g.served.Add(1)
	_, _ = io.WriteString(w, "ok")
}

func (g *gate) release() { g.once.Do(func() { close(g.hold) }) }

// serve starts a loopback server for h whose error log is kept quiet (the
// panic tests make the server log).
func serve(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// get sends a GET for tenant ("" for none) and returns the status, the
// Retry-After and the body.
func get(t *testing.T, ctx context.Context, url, tenant string) (int, string, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tenant != "" {
		req.Header.Set("X-Tenant", tenant)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(b), err
}

// mustGet is get that fails the test on a transport error.
func mustGet(t *testing.T, url, tenant string) (int, string, string) {
	t.Helper()
	code, ra, body, err := get(t, context.Background(), url, tenant)
	if err != nil {
		t.Fatal(err)
	}
	return code, ra, body
}
