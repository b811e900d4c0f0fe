package gateway

import (
	"bytes"
	"net/http"
)

// lengthScanner counts the Content-Length header lines in a byte stream:
// every line start ("\n") followed by "content-length:", in any case, even
// split across reads. Bodies can contain such lines too; they are counted,
// which can only make the gateway close a connection it could have kept.
//
// net/http serves a request with both Content-Length and Transfer-Encoding
// by the latter and drops the former from the header, so the handler cannot
// see that it had both; but RFC 9112 6.1 says the connection must then be
// closed after the response, since a front proxy that went by the length
// may already have sent the start of another request in the body (request
// smuggling). The scan is a byte search per line, cheap next to the read.
type lengthScanner struct {
	tail [len(lengthLine)]byte // the bytes after a line start at the end of the last read
	n    int                   // how many of tail are set; 0: no pending line start
	some bool                  // a line start is pending (n may be 0 right after "\n")
}

const lengthLine = "content-length:"

func (s *lengthScanner) count(p []byte) int {
	found := 0
	if s.some {
		s.n += copy(s.tail[s.n:], p)
		switch {
		case s.n == len(lengthLine):
			if isLengthLine(s.tail[:]) {
				found++
			}
		case bytes.IndexByte(p, '\n') < 0:
			return 0 // p ended within the line's first bytes
		}
		// Complete, or cut by a line break (no header name then): the
		// loop below looks at every line start in p.
		s.some, s.n = false, 0
	}
	for {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			return found
		}
		p = p[i+1:]
		if len(p) < len(lengthLine) {
			if bytes.IndexByte(p, '\n') >= 0 {
				continue // not a header name: a later line start may be
			}
			s.some = true
			s.n = copy(s.tail[:], p)
			return found
		}
		if isLengthLine(p[:len(lengthLine)]) {
			found++
		}
	}
}

func isLengthLine(b []byte) bool {
	for i := range len(lengthLine) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lengthLine[i] {
			return false
		}
	}
	return true
}

// connKey is the context key of a request's *conn (ProxyServer's
// ConnContext).
type connKey struct{}

// smuggled reports whether r, a chunked HTTP/1 request, also had a
// Content-Length, and keeps the connection's count in step for one that
// kept its Content-Length. Over TLS (no plain bytes to scan) and for a
// connection it does not know, a chunked request counts as suspect, and an
// HTTP/1.0 request always does.
func smuggled(r *http.Request) bool {
	if r.ProtoMajor != 1 {
		return false
	}
	if r.ProtoMinor == 0 {
		// net/http ignores an HTTP/1.0 request's Transfer-Encoding, and
		// drops it from the header: the request is framed by its
		// Content-Length, or has no body. A front proxy that went by the
		// chunks would have sent what the gateway then reads as a second
		// request, one the proxy never saw (with a tenant header of the
		// client's own). RFC 9112 6.1 has such a connection closed after
		// the answer; the handler cannot tell which requests had one, so
		// every HTTP/1.0 request closes its connection.
		return true
	}
	c, _ := r.Context().Value(connKey{}).(*conn)
	chunked := len(r.TransferEncoding) > 0
	switch {
	case c == nil || r.TLS != nil:
		return chunked
	case chunked:
		seen := c.lengths.Load()
		had := seen > c.consumed
		c.consumed = seen
		return had
	case len(r.Header["Content-Length"]) > 0:
		c.consumed++
	}
	return false
}
