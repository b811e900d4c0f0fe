package httpadmit_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/policy"
)

// A request whose handler hijacks its connection (an upgrade) holds its
// slot until the handler returns, as documented: after the hijack net/http
// no longer watches the connection, so the client's going away ends neither
// the request's context nor the slot; the handler sees it on the
// connection.
func TestHandlerHijackHoldsTheSlotUntilNextReturns(t *testing.T) {
	ev := newEvents()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)}, ev.listener())
	peerGone, ctxLive, release := make(chan struct{}), make(chan bool, 1), make(chan struct{})
	srv := serve(t, httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		_, _ = io.Copy(io.Discard, conn) // until the client closes
		close(peerGone)
		ctxLive <- r.Context().Err() == nil
		<-release
	})))
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "HTTP/1.1 101 Switching Protocols\r\n" {
		t.Fatalf("%q, %v", line, err)
	}
	c.Close()
	<-peerGone
	if !<-ctxLive {
		t.Error("the request's context ended with the hijacked connection")
	}
	if n := inFlight(ex, "a"); n != 1 {
		t.Errorf("%d in flight after the client went away, want 1 until next returns", n)
	}
	close(release)
	next(t, ev.completed)
	if n := inFlight(ex, "a"); n != 0 {
		t.Errorf("%d in flight after next returned", n)
	}
}
