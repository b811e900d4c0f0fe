package gateway_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// prefaceBound is how long the tests below give the gateway to close a
// connection that owes it its first bytes: well under net/http's own 10 s
// wait for an HTTP/2 preface, which they tell apart from the gateway's
// timeouts.read_header (1s there).
const prefaceBound = 5 * time.Second

// readToClose reads c until it fails, and returns the error: the close's
// (io.EOF, a reset), or the deadline's if c stayed open past within.
func readToClose(c net.Conn, within time.Duration) error {
	c.SetReadDeadline(time.Now().Add(within))
	_, err := io.Copy(io.Discard, c)
	if err == nil {
		err = io.EOF
	}
	return err
}

// A client that negotiates HTTP/2 and never sends its preface has its
// connection closed once timeouts.read_header has passed, as an HTTP/1
// client that sends no request is, not after net/http's fixed 10 s.
//
// read_header is also the bound net/http puts on the TLS handshake (the
// shortest of the server's timeouts): at 100ms a test stalled that long
// on a loaded machine had its handshake cut, and failed to dial. 1s is
// tens of times a handshake's cost under -race and load, and still well
// apart from net/http's 10 s.
func TestHTTP2SilentPrefaceClosedAtReadHeader(t *testing.T) {
	p := newPKI(t)
	be := backend(t, func(http.ResponseWriter, *http.Request) {})
	gw := start(t, be.URL, minimal+tlsConfig(p)+"timeouts: {read_header: 1s}\n")
	c := dialTLSH2(t, gw.url, p)
	if proto := c.ConnectionState().NegotiatedProtocol; proto != "h2" {
		t.Fatalf("negotiated %q, want h2", proto)
	}
	if err := readToClose(c, prefaceBound); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection that sent no preface is still open after %v, timeouts.read_header being 1s", prefaceBound)
	}
}

// An HTTP/2 client that sends its preface in time keeps its connection
// past timeouts.read_header: the bound is on the preface alone.
//
// read_header bounds the handshake and the preface here: 2s, a hundred
// times what they take under -race on a loaded machine. That it has
// passed is not slept for (a sleep past it was a guess at how late the
// gateway's timer runs): a silent connection accepted after the
// client's is closed by the gateway once its read_header has passed,
// and so the client's has too.
func TestHTTP2PrefaceInTimeKeepsTheConnection(t *testing.T) {
	p := newPKI(t)
	be := backend(t, func(http.ResponseWriter, *http.Request) {})
	gw := start(t, be.URL, minimal+tlsConfig(p)+"timeouts: {read_header: 2s}\n")
	f, _ := dialFramer(t, gw.url, p)
	if err := f.get(1, "a"); err != nil {
		t.Fatal(err)
	}
	silent := dialTLSH2(t, gw.url, p)
	if err := readToClose(silent, bound); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a connection that sent no preface is still open after %v, timeouts.read_header being 2s", bound)
	}
	// The answer to a request sent after read_header has passed since
	// the accept comes on the same connection.
	if err := f.get(3, "a"); err != nil {
		t.Fatal(err)
	}
	for answered := 0; answered < 2; {
		fr, err := f.ReadFrame()
		if err != nil {
			t.Fatalf("the connection closed before both answers: %v", err)
		}
		if fr.Header().Type == 0x1 /* HEADERS */ {
			answered++
		}
	}
}

// HTTP/2 connections that have not sent their preface are idle, as HTTP/1
// ones yet to send their first request are: a client holding its share of
// connections so, or every connection, has the one idle the longest
// closed for a newcomer, which is served.
func TestHTTP2SilentPrefaceHoldsNoPlace(t *testing.T) {
	p := newPKI(t)
	be := backend(t, func(http.ResponseWriter, *http.Request) {})
	gw := start(t, be.URL, minimal+tlsConfig(p)+"max_conns: 2\nmax_conns_per_client: 2\n")
	first := dialTLSH2(t, gw.url, p)
	dialTLSH2(t, gw.url, p)
	f, _ := dialFramer(t, gw.url, p)
	if err := f.get(1, "a"); err != nil {
		t.Fatal(err)
	}
	for {
		fr, err := f.ReadFrame()
		if err != nil {
			t.Fatalf("the newcomer was not answered: %v", err)
		}
		if fr.Header().Type == 0x1 /* HEADERS */ {
			break
		}
	}
	if err := readToClose(first, bound); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the silent connection idle the longest is still open, past its client's cap")
	}
}
