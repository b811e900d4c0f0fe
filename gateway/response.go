package gateway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// response is the ResponseWriter the proxy writes a backend's answer to.
// It keeps the answer (status, headers, up to limit bytes of body) so that
// the request's execution slot can be released as soon as the backend has
// answered, and a slow client reads it from the gateway's memory instead.
// An answer longer than limit, a text/event-stream and a protocol upgrade
// are committed to the client as they come instead (streamed: the slot is
// held until the client has them).
//
// The proxy writes to it from the request's goroutine only; it is not safe
// for concurrent use.
type response struct {
	x         *exchange           // the exchange it is part of, for proxyError
	w         http.ResponseWriter // the client's
	hdr       http.Header         // the answer's headers, until committed
	trailer   http.Header         // what the proxy adds to Header() after WriteHeader: trailers
	body      *bytes.Buffer       // pooled; nil until the first write
	status    int
	limit     int
	committed bool      // the status and headers have been sent to the client
	hijacked  bool      // the proxy took the client's connection over (a protocol upgrade)
	switched  time.Time // when it did, on the gateway's clock
	err       error     // the client's write error, once streaming
	// late is set when the request's deadline passed during a write to
	// the client: while the gateway waited on the client, not on the
	// backend (brokenOff). A write begun after the deadline (what the
	// proxy sends once a stalled backend's read fails) sets nothing.
	late  bool
	write time.Duration
	// ctx is the proxy call's (the request's deadline, the drain's abort):
	// a connection taken over for an upgrade is closed when it ends.
	ctx context.Context
	// unwatch stops the closing of a connection taken over (Hijack) at
	// ctx's end, once the proxy is done with it.
	unwatch func() bool
}

func (x *response) reset(w http.ResponseWriter, limit int, write time.Duration) {
	*x = response{x: x.x, w: w, hdr: x.hdr, trailer: x.trailer, limit: limit, write: write}
	if x.hdr == nil {
		x.hdr = make(http.Header)
	}
	clear(x.hdr)
	clear(x.trailer)
}

// Header returns the answer's headers until WriteHeader, then its trailers
// (the proxy writes both through Header).
func (x *response) Header() http.Header {
	switch {
	case x.hijacked:
		return x.hdr // the proxy writes the upgrade's answer itself
	case x.committed:
		return x.w.Header()
	case x.status == 0:
		return x.hdr
	}
	if x.trailer == nil {
		x.trailer = make(http.Header)
	}
	return x.trailer
}

// WriteHeader records the status. An informational answer (the backend's
// 100 Continue, a 103) is not the request's status and is not forwarded:
// the gateway has the body already, and answered Expect itself.
func (x *response) WriteHeader(code int) {
	if x.status != 0 || (code < 200 && code != http.StatusSwitchingProtocols) {
		return
	}
	x.status = code
	if code == http.StatusSwitchingProtocols || isEventStream(x.hdr) {
		x.commit()
	}
}

// isEventStream reports whether h's Content-Type is text/event-stream. It
// runs on every answer: a prefix test, where mime.ParseMediaType would
// allocate.
func isEventStream(h http.Header) bool {
	const es = "text/event-stream"
	ct := h.Get("Content-Type")
	if len(ct) < len(es) || !strings.EqualFold(ct[:len(es)], es) {
		return false
	}
	rest := ct[len(es):]
	return rest == "" || rest[0] == ';' || rest[0] == ' ' || rest[0] == '\t'
}

func (x *response) Write(p []byte) (int, error) {
	if x.status == 0 {
		x.WriteHeader(http.StatusOK)
	}
	if x.committed {
		return x.stream(p)
	}
	if x.body == nil {
		x.body = memPool.Get().(*bytes.Buffer)
	}
	if x.body.Len()+len(p) <= x.limit {
		return x.body.Write(p)
	}
	x.commit()
	if x.err != nil {
		return 0, x.err
	}
	return x.stream(p)
}

func (x *response) stream(p []byte) (int, error) {
	if x.err != nil {
		return 0, x.err
	}
	due := x.due()
	n, err := x.w.Write(p)
	x.err = err
	x.noteLate(due)
	return n, err
}

// due reports whether the request's deadline (or the drain's abort) has
// passed: its context has ended, or the clock is past its deadline, the
// timer not fired yet (over). Only a streamed answer's writes read it,
// each a clock reading.
func (x *response) due() bool { return x.ctx != nil && over(x.ctx) }

// noteLate records, after a write to the client that began with the
// deadline passed or not (wasDue), whether it passed during the write
// (late).
func (x *response) noteLate(wasDue bool) {
	if !wasDue && x.due() {
		x.late = true
	}
}

// Flush sends what is kept to the client once streaming; before, the answer
// is being kept and Flush does nothing.
func (x *response) Flush() {
	if x.committed && x.err == nil {
		due := x.due()
		x.err = http.NewResponseController(x.w).Flush()
		x.noteLate(due)
	}
}

// Unwrap gives http.ResponseController (deadlines, and what else the
// client's writer offers) the client's writer.
func (x *response) Unwrap() http.ResponseWriter { return x.w }

// Hijack hands the client's connection to the proxy for a protocol upgrade
// (the backend answered 101): the proxy writes the answer on the connection
// itself, so it is recorded here as answered with 101, and nothing is kept
// or sent through the server's writer after it.
//
// The connection is closed when the proxy call's context ends (the
// request's deadline, the drain's abort). net/http clears its deadlines as
// it hands it over, and the proxy then closes only the backend's
// connection: a client that neither sends nor reads would keep the
// proxy's copy from it, or to it, blocked, and with it the request's
// execution slot and its tenant's place, for as long as it kept the
// connection open.
func (x *response) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(x.w).Hijack()
	if err == nil && brw.Reader.Buffered() > 0 {
		// What the client sent after its request, in the protocol it asked
		// for (RFC 9110 7.8 lets it start once its request is sent), may be
		// read already: the proxy copies from the connection alone, and
		// would drop it.
		c = &bufferedConn{Conn: c, r: brw.Reader}
	}
	if err == nil {
		x.hijacked = true
		x.switched = x.x.g.clk.Now()
		x.status = http.StatusSwitchingProtocols
		if x.ctx != nil {
			x.unwatch = context.AfterFunc(x.ctx, func() { c.Close() })
		}
	}
	return c, brw, err
}

// answeredBy returns when the answer was given, for an answer ended at
// now: the switch, for a protocol upgrade. An upgraded connection lasts
// for as long as its client and backend talk, minutes or hours of a
// WebSocket: counted whole, a few of them made the mean behind every
// Retry-After its one-minute cap, and the latency histogram's p99 theirs,
// for requests that take milliseconds. The backend's work is its answer,
// the 101.
func (x *response) answeredBy(now time.Time) time.Time {
	if x.hijacked {
		return x.switched
	}
	return now
}

// bufferedConn is a connection taken over with bytes the server had read
// from it already: a read takes those first.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader // nil once drained
}

func (c *bufferedConn) Read(p []byte) (int, error) {
	if c.r != nil {
		if c.r.Buffered() > 0 {
			return c.r.Read(p) // only what is buffered: it reads no more
		}
		c.r = nil
	}
	return c.Conn.Read(p)
}

// CloseWrite half-closes the connection under it, as the proxy does when
// the backend ends its side of the upgrade.
func (c *bufferedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// unhijack stops watching a connection taken over, once the proxy has
// returned (and closed it).
func (x *response) unhijack() {
	if x.unwatch != nil {
		x.unwatch()
		x.unwatch = nil
	}
}

// commit sends the status, the headers and the body kept so far to the
// client, and makes every later write go straight to it. The client has
// timeouts.write from here to take the rest.
func (x *response) commit() {
	if x.committed {
		return
	}
	x.committed = true
	_ = http.NewResponseController(x.w).SetWriteDeadline(time.Now().Add(x.write))
	h := x.w.Header()
	for k, v := range x.hdr {
		h[k] = v
	}
	x.w.WriteHeader(x.status)
	if x.body != nil && x.body.Len() > 0 {
		due := x.due()
		_, x.err = x.w.Write(x.body.Bytes())
		x.body.Reset()
		x.noteLate(due)
	}
}

// finish sends a kept answer to the client, trailers last, and releases
// the memory it was kept in.
func (x *response) finish() {
	if !x.committed && !x.hijacked && x.status != 0 {
		trailer := x.trailer
		x.trailer = nil
		if len(trailer) == 0 {
			x.setLength()
		}
		x.commit()
		if len(trailer) > 0 {
			// Trailers go after the body, in chunked encoding: a flush
			// before them keeps net/http from sending a Content-Length.
			x.Flush()
			h := x.w.Header()
			for k, v := range trailer {
				h[k] = v
			}
			clear(trailer)
		}
		x.trailer = trailer
	}
	putBuffer(&x.body)
}

// setLength gives a kept answer without a Content-Length (the backend
// chunked it) its length, which the gateway knows, having it whole: else
// the server chunks an answer over its own small buffer, or, to an
// HTTP/1.0 client, ends it by closing the connection that client asked to
// keep. Not for an answer that has no body (to HEAD, 204, 304), whose
// length the backend alone can tell, nor one announcing trailers, which
// only chunks carry.
func (x *response) setLength() {
	if x.hdr["Content-Length"] != nil || x.hdr["Trailer"] != nil || x.hdr["Transfer-Encoding"] != nil ||
		x.status == http.StatusNoContent || x.status == http.StatusNotModified ||
		(x.x.req != nil && x.x.req.Method == http.MethodHead) {
		return
	}
	n := 0
	if x.body != nil {
		n = x.body.Len()
	}
	x.hdr["Content-Length"] = []string{strconv.Itoa(n)}
}

// discard drops a kept answer, so that the gateway can answer instead.
func (x *response) discard() {
	x.status = 0
	clear(x.hdr)
	clear(x.trailer)
	if x.body != nil {
		x.body.Reset()
	}
}
