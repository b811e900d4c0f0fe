package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

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
}

func newConnBackend(t *testing.T) *connBackend {
	t.Helper()
	b := &connBackend{closed: make(chan struct{}, 100), arrived: make(chan struct{}, 100), release: make(chan struct{})}
	b.url = rawBackend(t, func(c net.Conn, br *bufio.Reader) {
		defer func() { b.closed <- struct{}{} }()
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
	removed.waitClosed(t, "in use at the reload")
}
