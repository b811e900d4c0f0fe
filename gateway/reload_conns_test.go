package gateway_test

import (
	"bufio"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/gateway"
	"github.com/groupexec/groupexec/gateway/config"
)

// connBackend is a rawBackend answering 200 "ok" that says when each
// connection to it closes, and holds each request until release while
// hold is set.
type connBackend struct {
	url     string
	closed  chan struct{} // a value each time a connection to it closes
	arrived chan struct{} // a value each time a held request arrives
	release chan struct{}
	hold    atomic.Bool
	open    atomic.Int32 // connections to it open
	dialed  atomic.Int32 // connections to it, open or not
}

func newConnBackend(t *testing.T) *connBackend {
	t.Helper()
	b := &connBackend{closed: make(chan struct{}, 100), arrived: make(chan struct{}, 100), release: make(chan struct{})}
	b.url = rawBackend(t, func(c net.Conn, br *bufio.Reader) {
		b.open.Add(1)
		b.dialed.Add(1)
		defer func() {
			b.open.Add(-1)
			select {
			case b.closed <- struct{}{}:
			default: // a test of many connections counts them by open
			}
		}()
		for {
			if _, ok := readHeadText(br); !ok {
				return
			}
			if b.hold.Load() {
				b.arrived <- struct{}{}
				<-b.release
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	return b
}

// waitClosed waits for a connection to b to close.
func (b *connBackend) waitClosed(t *testing.T, what string) {
	t.Helper()
	select {
	case <-b.closed:
	case <-time.After(bound):
		t.Fatalf("%s: the gateway's connection to the removed backend is still open after %v", what, bound)
	}
}

// reloadBackends reloads gw with a config of backends alone.
func reloadBackends(t *testing.T, gw *running, backends ...string) {
	t.Helper()
	list := ""
	for i, b := range backends {
		if i > 0 {
			list += ", "
		}
		list += b
	}
	cfg, err := config.Parse(fmt.Appendf(nil, "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nbackends: [%s]\n", list))
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.gw.Reload(cfg); err != nil {
		t.Fatal(err)
	}
}

// A reload that removes a backend closes the gateway's idle connections to
// it at once, where net/http's transport would keep them pooled for 90 s,
// and only those: a connection to a backend kept stays open, and is used
// again.
func TestReloadClosesARemovedBackendsIdleConns(t *testing.T) {
	removed := newConnBackend(t)
	var keptConns atomic.Int32
	kept := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	kept.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			keptConns.Add(1)
		}
	}
	kept.Start()
	t.Cleanup(kept.Close)
	gw := start(t, removed.url+", "+kept.URL, minimal)
	c := client(t)
	// Round robin: two requests reach each backend once.
	for range 2 {
		if resp, _ := do(t, c, http.MethodGet, gw.url, "", nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d, want 200", resp.StatusCode)
		}
	}
	if n := keptConns.Load(); n != 1 {
		t.Fatalf("the kept backend got %d connections, want 1", n)
	}

	reloadBackends(t, gw, kept.URL)
	removed.waitClosed(t, "idle at the reload")
	if resp, _ := do(t, c, http.MethodGet, gw.url, "", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("after the reload: status %d, want 200", resp.StatusCode)
	}
	if n := keptConns.Load(); n != 1 {
		t.Errorf("the kept backend got %d connections, want its one kept open across the reload", n)
	}
}

// A request in flight to a backend a reload removes is answered as usual,
// and its connection to the backend closed once the answer is in, not
// pooled.
func TestReloadClosesARemovedBackendsConnAfterItsRequest(t *testing.T) {
	removed := newConnBackend(t)
	removed.hold.Store(true)
	other := backend(t, func(http.ResponseWriter, *http.Request) {})
	gw := start(t, removed.url, minimal)
	c := client(t)
	done := make(chan string, 1)
	go func() {
		resp, err := c.Get(gw.url)
		if err != nil {
			done <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- fmt.Sprint(resp.StatusCode, " ", string(b))
	}()
	select {
	case <-removed.arrived:
	case <-time.After(bound):
		t.Fatal("the request did not reach the backend")
	}

	reloadBackends(t, gw, other.URL)
	close(removed.release)
	select {
	case got := <-done:
		if got != "200 ok" {
			t.Fatalf("the request in flight across the reload got %q, want 200 ok", got)
		}
	case <-time.After(bound):
		t.Fatal("the request in flight across the reload was not answered")
	}
	if n := removed.dialed.Load(); n != 1 {
		t.Errorf("the removed backend got %d connections, want the request's one kept to its answer", n)
	}
	removed.waitClosed(t, "in use at the reload")
}

// A reload that removes the only backend while a tenant's requests queue
// behind one it holds: the held request is answered by the removed
// backend, the queued ones, admitted after the reload, by the backend in
// force, and the removed backend's connection is closed once its request
// is done.
func TestReloadRemovesTheBackendOfQueuedRequests(t *testing.T) {
	removed := newConnBackend(t)
	removed.hold.Store(true)
	var servedByOther atomic.Int32
	other := backend(t, func(http.ResponseWriter, *http.Request) { servedByOther.Add(1) })
	gw := start(t, removed.url, minimal+"limits: {max_concurrency_per_group: 1, queue_threshold_per_group: 10}\n")
	c := client(t)
	first := goDo(t, c, gw.url, "a")
	select {
	case <-removed.arrived:
	case <-time.After(bound):
		t.Fatal("the first request did not reach the backend")
	}
	var queued []<-chan int
	for range 3 {
		queued = append(queued, goDo(t, c, gw.url, "a"))
	}
	eventually(t, "3 requests to queue", func() bool { s, _ := gw.gw.Executor().GroupStats("a"); return s.Waiting == 3 })

	reloadBackends(t, gw, other.URL)
	close(removed.release)
	for i, done := range append([]<-chan int{first}, queued...) {
		select {
		case code := <-done:
			if code != http.StatusOK {
				t.Errorf("request %d: status %d, want 200", i+1, code)
			}
		case <-time.After(bound):
			t.Fatalf("request %d was not answered", i+1)
		}
	}
	if n := servedByOther.Load(); n != 3 {
		t.Errorf("the backend in force served %d of the 3 requests admitted after the reload", n)
	}
	removed.waitClosed(t, "its request done")
}

// Reloads that swap the backends back and forth under load: every request
// is answered, and once the last reload has removed a backend every
// connection to it is closed.
func TestReloadsSwappingBackendsUnderLoad(t *testing.T) {
	a, b := newConnBackend(t), newConnBackend(t)
	gw := start(t, a.url+", "+b.url, minimal)
	stop := make(chan struct{})
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			c := &http.Client{Timeout: bound} // keeps its connections to the gateway
			defer c.CloseIdleConnections()
			for {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				resp, err := c.Get(gw.url)
				if err != nil {
					errs <- err
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("status %d", resp.StatusCode)
					return
				}
			}
		}()
	}
	sets := [][]string{{a.url}, {b.url}, {a.url, b.url}, {b.url, a.url}}
	for i := range 40 {
		reloadBackends(t, gw, sets[i%len(sets)]...)
		// Requests are answered between two reloads.
		was := counted(t, gw.gw.Metrics())
		eventually(t, "requests answered after a reload", func() bool { return counted(t, gw.gw.Metrics()) >= was+4 })
	}
	reloadBackends(t, gw, b.url)
	close(stop)
	for range 8 {
		if err := <-errs; err != nil {
			t.Errorf("a request under the reloads: %v", err)
		}
	}
	eventually(t, "every connection to the removed backend to close", func() bool { return a.open.Load() == 0 })
}

// A reload that keeps a backend's host and port but changes its scheme
// (http to https) closes the connections of the old scheme, which the
// transport, pooling them by scheme too, would never use again.
func TestReloadClosesTheConnsOfABackendsOldScheme(t *testing.T) {
	removed := newConnBackend(t)
	gw := start(t, removed.url, minimal)
	if resp, _ := do(t, client(t), http.MethodGet, gw.url, "", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	reloadBackends(t, gw, "https://"+strings.TrimPrefix(removed.url, "http://"))
	removed.waitClosed(t, "its backend now https")
}

// An https backend speaking HTTP/2 carries several requests on one
// connection: a reload removing it leaves the connection open while any
// request on it runs, each answered as usual, and closes it once the last
// is done.
func TestReloadClosesARemovedHTTP2BackendsConnAfterItsStreams(t *testing.T) {
	arrived, release := make(chan struct{}, 2), make(chan struct{}, 2)
	closed := make(chan struct{}, 10)
	var opened atomic.Int32
	be := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		io.WriteString(w, "ok")
	}))
	be.EnableHTTP2 = true
	be.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			opened.Add(1)
		case http.StateClosed:
			closed <- struct{}{}
		}
	}
	be.StartTLS()
	t.Cleanup(be.Close)
	roots := x509.NewCertPool()
	roots.AddCert(be.Certificate())
	other := backend(t, func(http.ResponseWriter, *http.Request) {})
	gw := build(t, be.URL, minimal)
	gateway.TrustBackends(gw, roots)
	run := serve(t, gw)
	c := client(t)
	// The first opens the connection; the second goes on it once its
	// settings are in, while the first is held.
	first := goDo(t, c, run.url, "a")
	awaitArrival(t, arrived)
	second := goDo(t, c, run.url, "b")
	awaitArrival(t, arrived)
	if n := opened.Load(); n != 1 {
		t.Fatalf("the backend got %d connections for the two requests, want 1", n)
	}

	reloadBackends(t, run, other.URL)
	release <- struct{}{}
	// The second request is answered on the connection after the first:
	// it was not closed with the first's end.
	got := []int{<-statusWithin(t, first, second)}
	release <- struct{}{}
	got = append(got, <-statusWithin(t, first, second))
	if got[0] != http.StatusOK || got[1] != http.StatusOK {
		t.Errorf("statuses %v, want both 200", got)
	}
	select {
	case <-closed:
	case <-time.After(bound):
		t.Fatalf("the connection to the removed backend is still open after %v", bound)
	}
}

// awaitArrival waits for a value on arrived, failing the test after bound.
func awaitArrival(t *testing.T, arrived chan struct{}) {
	t.Helper()
	select {
	case <-arrived:
	case <-time.After(bound):
		t.Fatal("the request did not reach the backend")
	}
}

// statusWithin returns a channel with the first status a or b gives,
// failing the test after bound.
func statusWithin(t *testing.T, a, b <-chan int) <-chan int {
	t.Helper()
	out := make(chan int, 1)
	select {
	case s := <-a:
		out <- s
	case s := <-b:
		out <- s
	case <-time.After(bound):
		t.Fatal("no answer")
	}
	return out
}

// A reload that puts back a backend an earlier one removed, while a
// request to it set out before both is in flight, keeps the request's
// connection: once answered, it goes back to the pool for the backend in
// force again, and the next request to it is sent on it, not on a new one.
func TestReloadPuttingABackendBackKeepsItsConns(t *testing.T) {
	be := newConnBackend(t)
	be.hold.Store(true)
	other := backend(t, func(http.ResponseWriter, *http.Request) {})
	gw := start(t, be.url, minimal)
	c := client(t)
	first := goDo(t, c, gw.url, "a")
	awaitArrival(t, be.arrived)

	reloadBackends(t, gw, other.URL)
	reloadBackends(t, gw, be.url)
	be.hold.Store(false)
	close(be.release)
	if code := <-statusWithin(t, first, first); code != http.StatusOK {
		t.Fatalf("the request in flight across the reloads: status %d, want 200", code)
	}
	if resp, _ := do(t, c, http.MethodGet, gw.url, "a", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("the next request: status %d, want 200", resp.StatusCode)
	}
	if n := be.dialed.Load(); n != 1 {
		t.Errorf("the backend put back got %d connections, want the one kept across the reloads", n)
	}
}
