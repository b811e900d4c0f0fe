package gateway_test

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groupexec/groupexec/gateway"
)

// heldDials holds the gateway's dials to one backend address after the
// first free ones, until let: dialing says when each held one started.
type heldDials struct {
	addr    string
	free    int
	mu      sync.Mutex
	dialing chan struct{}
	let     chan struct{}
	once    sync.Once
}

func holdDials(t *testing.T, gw *gateway.Gateway, backendURL string, free int) *heldDials {
	t.Helper()
	u, err := url.Parse(backendURL)
	if err != nil {
		t.Fatal(err)
	}
	h := &heldDials{addr: u.Host, free: free, dialing: make(chan struct{}, 10), let: make(chan struct{})}
	t.Cleanup(h.release) // a failed test leaves no dial waiting
	gateway.OnBackendDial(gw, func(_ context.Context, addr string) error {
		if addr != h.addr {
			return nil
		}
		h.mu.Lock()
		held := h.free == 0
		if !held {
			h.free--
		}
		h.mu.Unlock()
		if held {
			h.dialing <- struct{}{}
			<-h.let
		}
		return nil
	})
	return h
}

func (h *heldDials) release() { h.once.Do(func() { close(h.let) }) }

func (h *heldDials) await(t *testing.T) {
	t.Helper()
	select {
	case <-h.dialing:
	case <-time.After(bound):
		t.Fatal("the gateway did not dial the backend")
	}
}

// awaitNoneRunning waits until g's executor runs no request of the
// default tenant: a request cancelled at its backend has ended, its try
// with it. (Not by the metrics: gathering them probes the backends'
// readiness, on connections of the probe's own.)
func awaitNoneRunning(t *testing.T, g *gateway.Gateway) {
	t.Helper()
	eventually(t, "the cancelled request to end", func() bool {
		s, ok := g.Executor().GroupStats(g.Config().Tenant.Default)
		return !ok || s.InFlight == 0
	})
}

// awaitOpen waits until b has n connections open.
func (b *connBackend) awaitOpen(t *testing.T, n int32, what string) {
	t.Helper()
	eventually(t, what, func() bool { return b.open.Load() == n })
}

// A connection dialed for a request to a backend a reload removes while
// the dial is under way, the request cancelled before the dial is done,
// is closed as it comes: no request will take it, where the transport's
// pool would keep it open for its idle timeout (90 s).
func TestReloadClosesARemovedBackendsConnDialedForACancelledRequest(t *testing.T) {
	removed := newConnBackend(t)
	other := backend(t, func(http.ResponseWriter, *http.Request) {})
	g := build(t, removed.url, minimal)
	dials := holdDials(t, g, removed.url, 0)
	gw := serve(t, g)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, gw.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := client(t)
	sent := make(chan error, 1)
	go func() {
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		sent <- err
	}()
	dials.await(t)
	reloadBackends(t, gw, other.URL)
	cancel()
	<-sent
	awaitNoneRunning(t, g)

	before := removed.dialed.Load()
	dials.release()
	eventually(t, "the held dial to reach the backend", func() bool { return removed.dialed.Load() == before+1 })
	removed.awaitOpen(t, 0, "the connection dialed for a request cancelled meanwhile to close")
}

// A connection dialed for a request that took, meanwhile, one another
// request gave back, to a backend a reload removes while the dial is
// under way, is closed once the requests in flight to the backend end:
// it was in the pool, used by none.
func TestReloadClosesARemovedBackendsConnDialedForARequestThatWentElsewhere(t *testing.T) {
	removed := newConnBackend(t)
	removed.hold.Store(true)
	other := backend(t, func(http.ResponseWriter, *http.Request) {})
	g := build(t, removed.url, "backends: [%s]\nlimits: {max_concurrency_per_group: 2}\n")
	dials := holdDials(t, g, removed.url, 1)
	registered := make(chan struct{}, 10) // never full: a dial never waits on the test
	gateway.WrapBackendConns(g, func(c net.Conn) net.Conn {
		registered <- struct{}{}
		return c
	})
	gw := serve(t, g)
	c := client(t)

	first, second := goDo(t, c, gw.url, ""), goDo(t, c, gw.url, "")
	awaitArrival(t, removed.arrived) // one request, on the first connection
	dials.await(t)                   // the other's dial, held
	<-registered
	removed.release <- struct{}{} // the first request is answered; its connection goes to the second
	awaitArrival(t, removed.arrived)
	if got := <-statusWithin(t, first, second); got != http.StatusOK {
		t.Fatalf("the first request answered got %d, want 200", got)
	}

	reloadBackends(t, gw, other.URL)
	dials.release()
	select {
	case <-registered: // the held dial is done, its connection in the gateway's hands
	case <-time.After(bound):
		t.Fatal("the held dial did not end")
	}
	removed.awaitOpen(t, 2, "the dialed connection to reach the backend")
	removed.release <- struct{}{}
	if got := <-statusWithin(t, first, second); got != http.StatusOK {
		t.Fatalf("the second request answered got %d, want 200", got)
	}
	removed.awaitOpen(t, 0, "every connection to the removed backend to close")
}

// A reload that keeps a backend's host and port but changes its scheme
// (http to https) closes a connection of the old scheme dialed for a
// request cancelled meanwhile as it comes: the transport pools
// connections by scheme too, and would never take it.
func TestReloadClosesAnOldSchemesConnDialedForACancelledRequest(t *testing.T) {
	removed := newConnBackend(t)
	g := build(t, removed.url, minimal)
	dials := holdDials(t, g, removed.url, 0)
	gw := serve(t, g)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, gw.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	sent := make(chan error, 1)
	go func() {
		resp, err := client(t).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		sent <- err
	}()
	dials.await(t)
	reloadBackends(t, gw, "https://"+strings.TrimPrefix(removed.url, "http://"))
	cancel()
	<-sent
	awaitNoneRunning(t, g)

	before := removed.dialed.Load()
	dials.release()
	eventually(t, "the held dial to reach the backend", func() bool { return removed.dialed.Load() == before+1 })
	removed.awaitOpen(t, 0, "the old scheme's connection dialed for a request cancelled meanwhile to close")
}
