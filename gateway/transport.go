package gateway

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync/atomic"
	"time"

	"github.com/groupexec/groupexec/breaker"
)

// Retry schedule: at most maxTries tries; before the second, a wait drawn
// from [backoffMin, backoffMax); each later wait doubles, up to backoffCap.
const (
	maxTries   = 3
	backoffMin = 50 * time.Millisecond
	backoffMax = 100 * time.Millisecond
	backoffCap = 2 * time.Second
)

// transport sends each proxied request to a backend, taking the backends in
// turn, and retries what is safe to retry.
//
// Only requests with no body whose method, and every method override
// they carry (retryable), is idempotent (RFC 9110 9.2.2) are retried, and
// only on a transport error (refused or reset connection, a
// response cut short): the request may have reached the backend, so the
// method must make a repeat harmless, and a streamed body cannot be sent
// twice without buffering it. A 5xx answer is passed to the client as it is:
// the backend has spoken, and retrying an overloaded backend adds to its load.
// Every try and wait fits in the request's deadline: a wait that would end
// past it is not started.
type transport struct {
	base http.RoundTripper
	// switches returns the HTTP/1-only transport that a request asking to
	// switch protocols goes to an https backend through (see RoundTrip).
	switches func() *http.Transport
	state    func() *state // the backends and their breakers
	next     atomic.Uint64
	retried  func() // counts a retry
	// conns, if not nil, is told which connection each try uses and when
	// it is done with it, so that a reload removing a backend closes its
	// connections as soon as no request uses them (conns.retire).
	conns *conns
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	st := t.state()
	at := t.next.Add(1)
	tries := 1
	if retryable(req) {
		tries = maxTries
	}
	// A request the gateway does not retry (a GET overridden to POST) is
	// not sent again by net/http's transport either: the backend would
	// run it twice when a kept-alive connection closed under it.
	once := tries == 1 && replayedUnasked(req)
	if pastDeadline(ctx) {
		// Admitted as its deadline passed by the clock, the context's
		// timer not fired yet (a loaded machine): no try starts past the
		// deadline. Sent on a kept-alive connection (a dial given it
		// fails by itself), the request reached the backend, which
		// worked on a request given up already.
		return nil, context.DeadlineExceeded
	}
	wait := backoffMin + rand.N(backoffMax-backoffMin)
	var err error
	for i := range tries {
		if i > 0 {
			if !sleep(ctx, wait) {
				return nil, err
			}
			wait = min(2*wait, backoffCap)
		}
		b, ticket, open := pick(st, at)
		if open != nil {
			if err == nil {
				err = open
			}
			return nil, err
		}
		if i > 0 {
			// Counted once a backend takes it: a retry every breaker
			// refuses is not sent.
			t.retried()
		}
		at = uint64(b) + 1
		// Judged as this try starts: a try given less than half the
		// request's timeout (the one its deadline was set from, whatever
		// a reload has set since) is not failed for missing its deadline.
		held := st.breakers == nil || heldToDeadline(ctx, timeoutsOf(ctx, &st.cfg.Timeouts).Upstream)
		// The RoundTripper contract forbids changing req: each try gets a
		// copy pointed at its backend. SetURL changes only the URL and Host,
		// so a shallow copy with its own URL is enough; req.Clone would also
		// deep-copy the headers, which the ReverseProxy has just copied, on
		// every request (see TestTransportLeavesRequestAlone).
		use := t.use(ctx, st, b)
		out := req.WithContext(use.ctx)
		u := *req.URL
		out.URL = &u
		(&httputil.ProxyRequest{Out: out}).SetURL(st.backends[b])
		if once {
			out.Body = unreplayable{}
		}
		base := t.base
		if t.switches != nil && out.URL.Scheme == "https" && upgradeType(out.Header) != "" {
			// A switch is HTTP/1's: net/http's transport keeps only a
			// switch to "websocket" off the HTTP/2 connection an https
			// backend offers, and refuses to send any other over it, an
			// error that counted as the backend's failure (502).
			base = t.switches()
		}
		var resp *http.Response
		resp, err = base.RoundTrip(out)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			resp = use.until(resp)
		} else {
			// An upgraded connection is the proxy's from here, and closed
			// by it: it stays in use, but the try is over.
			use.end()
		}
		switch {
		case err == nil && resp.StatusCode == http.StatusSwitchingProtocols && !switchAsked(out, resp):
			// The proxy would refuse this switch too, but without closing
			// the connection the backend handed over with it: it would stay
			// open, the backend's and the gateway's, until the gateway
			// closes. The backend has spoken, wrongly: not retried.
			resp.Body.Close()
			ticket.Failure()
			return nil, errUnaskedSwitch
		case err == nil && (resp.StatusCode < 100 || resp.StatusCode > 599):
			// No HTTP status (RFC 9110 15), though net/http reads any three
			// digits: one under 100 became the client's 200 (the server's
			// writer takes no such status, and the proxy's next write
			// says 200), or, without a body, an answer never written.
			// A client is to take such a status for a 5xx: it is the
			// backend's failure, answered 502, not retried.
			resp.Body.Close()
			ticket.Failure()
			return nil, errBadStatus
		case err == nil && resp.StatusCode >= 500:
			ticket.Failure()
		case err == nil && resp.Body != nil && resp.Body != http.NoBody &&
			resp.StatusCode != http.StatusSwitchingProtocols && st.breakers != nil:
			// The verdict waits for the body: a backend that sends its
			// headers and then breaks its answer off has failed.
			resp.Body = &judgedBody{ReadCloser: resp.Body, ctx: ctx, ticket: ticket, held: held}
		case err == nil:
			ticket.Success()
		case headerListTooLarge(err):
			// The request's headers are over what the backend announced it
			// takes (HTTP/2's SETTINGS_MAX_HEADER_LIST_SIZE), and the
			// transport refused to send it: the request's size, as the 431
			// a backend over HTTP/1 answers itself, not the backend's
			// failure, which any client could so count for every tenant.
			// Not retried: another try is refused alike.
			ticket.Ignore()
			return nil, errHeadersTooLarge
		case ctx.Err() != nil && !deadlinePassed(ctx), deadlinePassed(ctx) && !held:
			// The client went away, or the deadline passed on a backend
			// given too little of it (heldToDeadline): nothing learned of
			// the backend.
			ticket.Ignore()
		default:
			ticket.Failure()
		}
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, err
}

// errUnaskedSwitch is the transport's error for a backend that answered
// 101 Switching Protocols to a request that did not ask for that protocol.
var errUnaskedSwitch = errors.New("gateway: the backend switched protocols unasked")

// errHeadersTooLarge is the transport's error for a request whose headers
// are over what its backend announced it takes (headerListTooLarge).
var errHeadersTooLarge = errors.New("gateway: the request's headers are over the backend's limit")

// headerListTooLarge reports whether err is net/http's HTTP/2 transport
// refusing to send a request whose headers are over the peer's
// SETTINGS_MAX_HEADER_LIST_SIZE. The error is not exported (an
// internal package's): it is known by its text.
func headerListTooLarge(err error) bool {
	return strings.Contains(err.Error(), "request header list larger than peer's advertised limit")
}

// errBadStatus is the transport's error for a backend that answered a
// status outside 100-599.
var errBadStatus = errors.New("gateway: the backend answered a status outside 100-599")

// switchAsked reports whether resp, a 101, switches to the protocol req
// asked for, as httputil.ReverseProxy accepts a switch: req is HTTP/1 with
// "Connection: upgrade" and an Upgrade that resp names too (in ASCII, any
// case), and the backend's connection came with resp to be taken over.
func switchAsked(req *http.Request, resp *http.Response) bool {
	asked, answered := upgradeType(req.Header), upgradeType(resp.Header)
	if asked == "" || req.ProtoMajor != 1 || len(asked) != len(answered) {
		return false
	}
	for i := range len(asked) {
		a, b := asked[i], answered[i]
		if a < 0x20 || a > 0x7e || b < 0x20 || b > 0x7e || lower(a) != lower(b) {
			return false
		}
	}
	_, writable := resp.Body.(io.Writer)
	return writable
}

// upgradeType is the protocol h asks to switch to: its Upgrade, when its
// Connection lists "upgrade"; else "".
func upgradeType(h http.Header) string {
	for _, v := range h["Connection"] {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return h.Get("Upgrade")
			}
		}
	}
	return ""
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// judgedBody is an answer's body that finishes its backend's breaker ticket
// once read: a success at its end, a failure if reading it fails (the
// backend broke it off, or the deadline passed while the proxy waited on
// it), nothing if the client went away first or the body is closed before
// its end (the proxy could not send it to the client), nor if the deadline
// passed on a backend not held to it (heldToDeadline). A deadline that had
// passed before a read began passed while the proxy was away from the
// backend, writing what it had read to a client slow to take it: it says
// nothing of the backend, which had sent as fast as the proxy read.
type judgedBody struct {
	io.ReadCloser
	ctx    context.Context
	ticket breaker.Ticket
	held   bool // the backend is held to ctx's deadline (heldToDeadline)
}

func (b *judgedBody) Read(p []byte) (int, error) {
	away := over(b.ctx) // a clock reading a read, beside the read's own system call
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == nil:
	case err == io.EOF:
		b.ticket.Success()
	case away, b.ctx.Err() != nil && !deadlinePassed(b.ctx), deadlinePassed(b.ctx) && !b.held:
		b.ticket.Ignore()
	default:
		b.ticket.Failure()
	}
	return n, err
}

func (b *judgedBody) Close() error {
	b.ticket.Ignore() // a no-op once Read has finished it
	return b.ReadCloser.Close()
}

// pick returns the first backend from at (in turn) whose breaker lets a
// request through, with its ticket; or, when every breaker refuses, an
// *openError saying when the first will let one through.
func pick(st *state, at uint64) (int, breaker.Ticket, *openError) {
	n := uint64(len(st.backends))
	if st.breakers == nil {
		return int(at % n), breaker.Ticket{}, nil
	}
	var soonest time.Duration
	for k := range n {
		b := int((at + k) % n)
		ticket, wait, ok := st.breakers[b].allow()
		if ok {
			return b, ticket, nil
		}
		if k == 0 || wait < soonest {
			soonest = wait
		}
	}
	return 0, breaker.Ticket{}, &openError{retryAfter: soonest}
}

// retryable reports whether req may be sent again after a transport error:
// its method is idempotent, and so is every method it asks the backend to
// run instead (anyOverride), which the backend runs, not req.Method.
func retryable(req *http.Request) bool {
	if !idempotent(req.Method) || req.Body != nil && req.Body != http.NoBody {
		return false
	}
	return !anyOverride(req.Header, req.URL.RawQuery, func(m string) bool { return !idempotent(strings.ToUpper(m)) })
}

// idempotent reports whether method is idempotent (RFC 9110 9.2.2).
func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// sleep waits d unless ctx ends first or its deadline is less than d away;
// it reports whether it waited, with the deadline still ahead by the clock
// (a timer fires late on a loaded machine, and no try starts past it).
func sleep(ctx context.Context, d time.Duration) bool {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return !pastDeadline(ctx)
	case <-ctx.Done():
		return false
	}
}

// tryUse is one try's hold on its backend connection (connUse), when the
// transport tracks them.
type tryUse struct {
	ctx context.Context // the try's, tracing the connection it gets
	u   *connUse
}

// use starts a try to st's backend b.
func (t *transport) use(ctx context.Context, st *state, b int) tryUse {
	if t.conns == nil {
		return tryUse{ctx: ctx}
	}
	u := new(connUse)
	if b < len(st.tries) {
		u.to = st.tries[b]
		u.to.start()
		// The dial made for the try learns its scheme (conns.dial).
		ctx = context.WithValue(ctx, dialTryKey{}, u.to)
	}
	return tryUse{ctx: u.traced(ctx), u: u}
}

// end ends the try's count among those in flight to its address, its hold
// on the connection left as it is (connUse.end).
func (tu tryUse) end() {
	if tu.u != nil {
		tu.u.end()
	}
}

// until has the hold end with resp's body, or at once for a failed try or
// an answer without a body, whose connection is the transport's again.
func (tu tryUse) until(resp *http.Response) *http.Response {
	switch {
	case tu.u == nil:
	case resp == nil || resp.Body == nil || resp.Body == http.NoBody:
		tu.u.done()
	default:
		tu.u.body = usedBody{ReadCloser: resp.Body, use: tu.u}
		resp.Body = &tu.u.body
	}
	return resp
}

// usedBody is an answer's body that ends its connection's hold once
// closed: the proxy closes every body, read to its end or not.
type usedBody struct {
	io.ReadCloser
	use *connUse
}

func (b *usedBody) Close() error {
	err := b.ReadCloser.Close()
	b.use.done()
	return err
}
