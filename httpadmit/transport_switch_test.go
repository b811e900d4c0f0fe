package httpadmit_test

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/policy"
)

// switchingServer answers every request 101, switching to protocol, and
// signals on gone once the switched connection has been closed by its
// client.
func switchingServer(t *testing.T, protocol string) (srv *httptest.Server, gone <-chan struct{}) {
	ended := make(chan struct{}, 16)
	srv = serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + protocol + "\r\n\r\n")
		brw.Flush()
		io.Copy(io.Discard, brw) // until the client closes the connection
		ended <- struct{}{}
	}))
	return srv, ended
}

// A backend that switches protocols where the request asked for no switch,
// or for another protocol, has broken HTTP (RFC 9110 section 7.8): the
// Transport closes the connection it handed over, frees the slot before
// RoundTrip returns, and returns an error. Returned as a 101, its slot was
// held until a Close that httputil.ReverseProxy never makes for a switch it
// refuses: one such answer took a slot of the destination's for good. A
// switch to one protocol of a list the request asked for is refused as
// ReverseProxy refuses it (it takes a switch only to the Upgrade asked for
// as a whole): through a proxy, any client sending such a list took a slot
// for good.
func TestTransportRefusesAnUnaskedSwitch(t *testing.T) {
	for _, tc := range []struct {
		name, asked, answered string
		counted               executor.Status
	}{
		{"no switch asked", "", "echo", executor.Failed},
		{"another protocol asked", "websocket", "echo", executor.Failed},
		// The destination chose from the client's list, as RFC 9110 lets
		// it: no failure of its.
		{"one protocol of a list", "websocket, echo", "echo", executor.Cancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEvents()
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)}, ev.listener())
			srv, gone := switchingServer(t, tc.answered)
			target, _ := url.Parse(srv.URL)
			proxy := httputil.NewSingleHostReverseProxy(target)
			proxy.Transport = httpadmit.Transport(ex, srv.Client().Transport)
			proxy.ErrorLog = discardLog
			front := serve(t, proxy)

			req, _ := http.NewRequest(http.MethodGet, front.URL, nil)
			if tc.asked != "" {
				req.Header.Set("Connection", "Upgrade")
				req.Header.Set("Upgrade", tc.asked)
			}
			resp, err := front.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadGateway {
				t.Fatalf("status %d, want 502", resp.StatusCode)
			}
			if n := inFlight(ex, host(t, srv.URL)); n != 0 {
				t.Fatalf("%d in flight once the proxy answered, want 0: the switched connection holds the slot", n)
			}
			select {
			case <-gone:
			case <-time.After(10 * time.Second):
				t.Fatal("the connection the backend switched was never closed")
			}
			if e := next(t, ev.completed); e.Status != tc.counted {
				t.Errorf("counted %v, want %v", e.Status, tc.counted)
			}
		})
	}
}

// A switch to the protocol asked for, in any case, is the caller's
// connection, as before.
func TestTransportTakesAnAskedSwitch(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)})
	srv, gone := switchingServer(t, "Echo")
	rt := httpadmit.Transport(ex, srv.Client().Transport)
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Connection", "keep-alive, Upgrade")
	req.Header.Set("Upgrade", "echo")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if _, ok := resp.Body.(io.ReadWriteCloser); !ok {
		t.Fatalf("body %T is not writable", resp.Body)
	}
	if n := inFlight(ex, host(t, srv.URL)); n != 1 {
		t.Errorf("%d in flight while switched, want 1", n)
	}
	resp.Body.Close()
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the switched connection was not closed by Close")
	}
	if n := inFlight(ex, host(t, srv.URL)); n != 0 {
		t.Errorf("%d in flight after Close", n)
	}
}

// discardLog drops httputil.ReverseProxy's error lines.
var discardLog = log.New(io.Discard, "", 0)
