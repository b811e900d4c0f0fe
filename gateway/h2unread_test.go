package gateway_test

import (
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/groupexec/groupexec/breaker"
)

// streamForever is a backend that answers with a body that never ends,
// written as fast as the gateway takes it, until the gateway gives the
// request up.
func streamForever(w http.ResponseWriter, r *http.Request) {
	chunk := make([]byte, 32<<10)
	rc := http.NewResponseController(w)
	for {
		if _, err := w.Write(chunk); err != nil {
			return
		}
		if rc.Flush() != nil {
			return
		}
	}
}

// socketBuffer is what the sockets between a client granting every window
// and the gateway hold, each way: a few KiB, so that the client reading
// nothing blocks the gateway's writes at once, well before the stream's
// write deadline. With the buffers the kernel sizes for loopback (MiBs),
// filling them through TLS and the proxy could take a slow machine past
// timeouts.write: the stream's reset then went out unblocked, and nothing
// was left to close the connection for.
const socketBuffer = 4 << 10

// smallBuffers wraps the gateway's listener: the connections it accepts
// send through a buffer of socketBuffer.
func smallBuffers(l net.Listener) net.Listener { return smallBufferListener{l} }

type smallBufferListener struct{ net.Listener }

func (l smallBufferListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		if err := tc.SetWriteBuffer(socketBuffer); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, err
}

// An HTTP/2 client that stops taking its answers holds no slot past
// timeouts.write, however it stops. Granting no flow-control window, it
// has its stream reset at the stream's write deadline. Granting every
// window but reading nothing off the connection, it leaves the server's
// frame writer blocked in the connection's write, where the stream's
// reset, queued behind the frame being written, was never sent: the
// stream never closed, and its handler, with the slot of its streamed
// answer, was held for as long as the client kept the connection open;
// now the connection is closed once no byte of it has gone out for
// timeouts.write.
func TestHTTP2UnreadAnswerHoldsNoSlot(t *testing.T) {
	for _, tc := range []struct {
		name string
		// window is what the client grants beyond the initial 64 KiB,
		// on its stream and on the connection.
		window uint32
		// closes: the connection is closed, not only the stream reset.
		closes bool
	}{
		{"no window", 0, false},
		{"window but no reads", 1<<31 - 1 - 65535, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A try whose premise the machine's pace broke is made
			// again, with a gateway of its own (see unblockedReset).
			for try := 1; !unreadAnswerTry(t, tc.window, tc.closes); try++ {
				if try == 10 {
					t.Fatal("in 10 tries the stream's write deadline passed each time before the connection's buffers were full")
				}
			}
		})
	}
}

// unreadAnswerTry is one try of TestHTTP2UnreadAnswerHoldsNoSlot, with a
// gateway of its own; it reports false when the try cannot be judged.
func unreadAnswerTry(t *testing.T, window uint32, closes bool) (judged bool) {
	t.Helper()
	p := newPKI(t)
	sockets := func(l net.Listener) net.Listener { return l }
	if window > 0 {
		sockets = smallBuffers
	}
	// The backend is reached only by an admitted request.
	admitted := make(chan struct{}, 1)
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		admitted <- struct{}{}
		streamForever(w, r)
	})
	gw := serveWith(t, build(t, be.URL, minimal+tlsConfig(p)+
		"response: {buffer_bytes: 1024}\ntimeouts: {write: 200ms, upstream: 1h}\n"+
		"breaker: {per: tenant, consecutive_failures: 1, timeout: 1h}\n"+
		"limits: {max_concurrency_per_group: 1, max_in_flight_per_group: 1, queue_threshold_per_group: 0}\n"),
		sockets)
	m := gw.gw.Metrics()
	f, _ := dialFramer(t, gw.url, p)
	if window > 0 {
		if err := f.c.NetConn().(*net.TCPConn).SetReadBuffer(socketBuffer); err != nil {
			t.Fatal(err)
		}
		if err := f.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1}); err != nil {
			t.Fatal(err)
		}
		if err := f.WriteWindowUpdate(0, window); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.get(1, "a"); err != nil {
		t.Fatal(err)
	}
	// Nothing is read from here on: the answer fills the
	// client's window, or the connection's buffers.
	// Received, not polled for as Running == 1: the request runs
	// only until the stream's write deadline, 200ms, which a
	// poll on a slow machine can miss.
	select {
	case <-admitted:
	case <-time.After(bound):
		t.Fatal("the request never reached the backend")
	}
	eventually(t, "the unread answer to give its slot back", func() bool {
		s, _ := gw.gw.Executor().GroupStats("a")
		return s.Running == 0 && metric(t, m, inGatewayGauge) == 0
	})
	// The client's doing, not the backend's.
	if s, _ := gw.gw.Executor().GroupStats("a"); s.Breaker != breaker.StateClosed {
		t.Errorf("tenant a's breaker is %v after its client took nothing, want closed", s.Breaker)
	}
	if closes {
		// A connection the gateway cannot write to is of no use
		// to anyone: it is closed, not left to hold a place
		// under max_conns.
		for deadline := time.Now().Add(bound); metric(t, m, "gateway_connections") != 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				if unblockedReset(t, f) {
					return false
				}
				t.Fatal("timed out waiting for the connection to be closed")
			}
		}
	}
	return true
}

// unblockedReset reads f, on a connection the gateway left open, up to the
// reset of stream 1, and reports whether the reset went out with no more
// of the answer ahead of it than the gateway keeps before it streams
// (buffer_bytes, 1024, twice over for the frames' and records' overhead):
// the connection's buffers were never full, so the gateway's writes were
// never blocked, and there was nothing to close it for. That is what a
// stall of the machine longer than timeouts.write between the answer's
// commit (which sets the stream's write deadline) and its first streamed
// write gives. A connection the gateway's writes are blocked on holds
// more than socketBuffer ahead of the reset.
func unblockedReset(t *testing.T, f *framer) bool {
	t.Helper()
	f.c.SetDeadline(time.Now().Add(bound))
	data := 0
	for {
		fr, err := f.ReadFrame()
		if err != nil {
			t.Fatalf("reading the connection left open: %v (%d bytes of the answer read)", err, data)
		}
		switch fr := fr.(type) {
		case *http2.DataFrame:
			if fr.StreamID == 1 {
				data += len(fr.Data())
			}
		case *http2.RSTStreamFrame:
			if fr.StreamID == 1 {
				t.Logf("the stream was reset after %d bytes of its answer, the connection left open", data)
				return data <= 2*1024
			}
		}
	}
}
