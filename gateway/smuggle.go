package gateway

import (
	"bytes"
	"net/http"
)

// lineScanner counts the header lines of one name in a byte stream: every
// line start ("\n") followed by the name, in any case, even split across
// reads. Blanks (SP, HTAB) before the name are skipped: such a line is an
// obs-fold continuation, which net/http joins to the line before it, but
// which a front proxy may take for a header of its own. Bodies can contain
// such lines too; they are counted, which can only make the gateway close a
// connection it could have kept.
//
// net/http serves a request with both Content-Length and Transfer-Encoding
// by the latter and drops the former from the header, so the handler cannot
// see that it had both; but RFC 9112 6.1 says the connection must then be
// closed after the response, since a front proxy that went by the length
// may already have sent the start of another request in the body (request
// smuggling). The scan is a byte search per line, cheap next to the read.
type lineScanner struct {
	at     bool // within a line's first bytes, so far blanks and the start of the name
	n      int  // how many of the name's bytes
	folded bool // the line started with blanks
}

// The header names lineScanner counts, in lower case. A Transfer-Encoding
// line is counted without its colon: one with blanks before the colon,
// which net/http refuses but a front proxy may take, counts too.
const (
	lengthLine   = "content-length:"
	encodingLine = "transfer-encoding"
)

// count returns how many lines starting with name (in lower case) end in
// p, given the bytes before p that this scanner was given, and how many of
// those were folded (started with blanks).
func (s *lineScanner) count(p []byte, name string) (found, folded int) {
	for len(p) > 0 {
		if !s.at {
			i := bytes.IndexByte(p, '\n')
			if i < 0 {
				return found, folded
			}
			p = p[i+1:]
			s.at, s.n, s.folded = true, 0, false
			continue
		}
		switch c := p[0]; {
		case c == '\n':
			s.n, s.folded = 0, false // an empty line, or blanks only: another line start
		case s.n == 0 && (c == ' ' || c == '\t'):
			s.folded = true
		case lower(c) == name[s.n]:
			if s.n++; s.n == len(name) {
				found++
				if s.folded {
					folded++
				}
				s.at = false
			}
		default:
			s.at = false
		}
		p = p[1:]
	}
	return found, folded
}

// connKey is the context key of a request's *conn (ProxyServer's
// ConnContext).
type connKey struct{}

// smuggled reports whether r's connection must be closed after its answer:
// r, an HTTP/1.0 request, had a Transfer-Encoding line; r, a chunked
// HTTP/1.1 request, also had a Content-Length; or r had a Transfer-Encoding
// (HTTP/1.1) or a Content-Length on a folded line. It keeps the
// connection's counts in step with the requests served. Over TLS (no plain
// bytes to scan) and for a connection it does not know, a chunked request,
// every HTTP/1.0 request and one with a value a folded framing line was
// joined to (foldedFraming) count as suspect.
func smuggled(r *http.Request) bool {
	if r.ProtoMajor != 1 {
		return false
	}
	c, _ := r.Context().Value(connKey{}).(*conn)
	plain := c != nil && r.TLS == nil
	if r.ProtoMinor == 0 {
		// net/http ignores an HTTP/1.0 request's Transfer-Encoding, and
		// drops it from the header: the request is framed by its
		// Content-Length, or has no body. A front proxy that went by the
		// chunks would have sent what the gateway then reads as a second
		// request, one the proxy never saw (with a tenant header of the
		// client's own). RFC 9112 6.1 has such a connection closed after
		// the answer. Only the scan of the connection's bytes can tell
		// whether this request had one: every Transfer-Encoding line seen
		// so far that no earlier request accounts for counts as its own.
		if !plain {
			return true
		}
		if len(r.Header["Content-Length"]) > 0 {
			c.consumed++
		}
		seen := c.encodings.Load()
		had := seen > c.encConsumed
		c.encConsumed = seen
		c.foldedConsumed = c.foldedEncodings.Load()
		return had || c.hadFoldedLength()
	}
	chunked := len(r.TransferEncoding) > 0
	if !plain {
		// Without the bytes, a Transfer-Encoding or Content-Length on a
		// folded line is seen only in the value net/http joined the line
		// to (foldedFraming).
		return chunked || foldedFraming(r.Header)
	}
	// So is a Content-Length on a folded line, which net/http does not
	// frame the request by: a front proxy that did sent a body the
	// gateway reads as the next request (or, beside a length of
	// net/http's own, sent another length of it).
	hadFoldedLength := c.hadFoldedLength()
	// A Transfer-Encoding on a folded line is part of the header before it
	// to net/http, which never takes a folded line for a header of its
	// own: a front proxy that did went by the chunks, and what it sent as
	// their data the gateway reads as the next request. Only folded lines
	// count here: an HTTP/1.1 request's unfolded Transfer-Encoding is
	// net/http's own (served chunked, or refused), so that a chunked
	// request pipelined after this one does not close its connection.
	folded := c.foldedEncodings.Load()
	hadFolded := folded > c.foldedConsumed
	c.foldedConsumed = folded
	switch {
	case chunked:
		// net/http serves an HTTP/1.1 request with one Transfer-Encoding
		// line at most.
		c.encConsumed++
		seen := c.lengths.Load()
		had := seen > c.consumed
		c.consumed = seen
		return had || hadFolded
	case len(r.Header["Content-Length"]) > 0:
		c.consumed++
	}
	return hadFolded || hadFoldedLength
}

// hadFoldedLength reports whether a Content-Length line on a folded line
// came that no earlier request of c accounts for, and accounts for it.
func (c *conn) hadFoldedLength() bool {
	folded := c.foldedLengths.Load()
	had := folded > c.foldedLenConsumed
	c.foldedLenConsumed = folded
	return had
}

// foldedFraming reports whether a value of h holds a Transfer-Encoding
// or Content-Length line that net/http joined to it: an obs-fold
// continuation line is joined to the value before it, its blanks made one
// space, so the name (in any case) is at the value's start, or after a
// blank. net/http frames such a request by its own length, or as
// bodiless, and a front proxy that took the folded line for a header of
// its own by the chunks or the length it names (see smuggled). Any value
// naming one so counts, which can only make the gateway close a
// connection it could have kept.
func foldedFraming(h http.Header) bool {
	for _, vs := range h {
		for _, v := range vs {
			if namesAfterBlank(v, encodingLine) || namesAfterBlank(v, lengthName) {
				return true
			}
		}
	}
	return false
}

// lengthName is lengthLine without its colon: in a joined value it is
// matched as encodingLine is.
const lengthName = "content-length"

// namesAfterBlank reports whether v holds name (in lower case), in any
// case, at its start or after a blank.
func namesAfterBlank(v, name string) bool {
	for i := 0; i+len(name) <= len(v); i++ {
		if (i == 0 || v[i-1] == ' ' || v[i-1] == '\t') && lower(v[i]) == name[0] &&
			asciiEqualFold(v[i:i+len(name)], name) {
			return true
		}
	}
	return false
}

// asciiEqualFold reports whether s equals lowerCase, a lower-case ASCII
// string, in any case.
func asciiEqualFold(s, lowerCase string) bool {
	if len(s) != len(lowerCase) {
		return false
	}
	for i := range len(s) {
		if lower(s[i]) != lowerCase[i] {
			return false
		}
	}
	return true
}
