package httpadmit_test

import (
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/internal/adaptertest"
	"github.com/groupexec/groupexec/policy"
)

// Over HTTP/1, net/http sees a client go away only once the request's
// body has been read to its end, as Handler's documentation says: a
// waiting request without a body is cancelled when its client closes the
// connection, one whose body waits unread keeps its place.
func TestHandlerHTTP1BodyKeepsItsPlaceWhenItsClientGoesAway(t *testing.T) {
	ev := newEvents()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithDefaultMaxInFlight(3)}, ev.listener())
	g := newGate(t)
	srv := serve(t, httpadmit.Handler(ex, g))
	first := make(chan struct{})
	go func() { defer close(first); mustGet(t, srv.URL, "a") }()
	<-g.entered
	next(t, ev.submitted)

	// send returns once the request waits: its Submitted event comes before
	// the executor queues it, so a check right after that event could see
	// it not yet waiting.
	send := func(req string, waiting int) net.Conn {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		next(t, ev.submitted)
		adaptertest.Eventually(t, fmt.Sprintf("%d requests waiting", waiting), func() bool { s, _ := ex.GroupStats("a"); return s.Waiting == waiting })
		return c
	}
	post := send("POST / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\nContent-Length: 2\r\n\r\nhi", 1)
	get := send("GET / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\n\r\n", 2)
	post.Close()
	get.Close()
	if e := next(t, ev.completed); e.Status != executor.Cancelled {
		t.Fatalf("the request without a body ended %v, want Cancelled", e.Status)
	}
	if s, _ := ex.GroupStats("a"); s.Waiting != 1 {
		t.Fatalf("%d waiting, want 1: the request whose body was unread", s.Waiting)
	}
	g.release()
	<-first
	if e := next(t, ev.completed); e.Status != executor.Success {
		t.Errorf("first request ended %v", e.Status)
	}
	if e := next(t, ev.completed); e.Status != executor.Success {
		t.Errorf("the request with a body ended %v, want Succeeded: it kept its place and ran", e.Status)
	}
}
