package gateway

import (
	"io"
	"net/http"
)

// unreplayable is the body of a request without one that net/http's
// transport must send once only: a body that is not http.NoBody, without
// GetBody, makes the transport take the request for one it cannot send
// again. Empty, it puts nothing on the HTTP/1 wire: the transport reads it
// before it writes a GET's, HEAD's or OPTIONS' header, and sends no length.
// Over HTTP/2 the request ends with an empty DATA frame, not with its
// headers: a body of no bytes, and of no announced length, to the backend.
type unreplayable struct{}

func (unreplayable) Read([]byte) (int, error) { return 0, io.EOF }
func (unreplayable) Close() error             { return nil }

// replayedUnasked reports whether net/http's transport would send req again
// by itself, on a new connection, when the kept-alive one it was sent on
// closes before the answer: a GET, HEAD or OPTIONS without a body, which
// it takes for idempotent whatever method override it carries. (TRACE, the
// fourth, is never proxied.)
func replayedUnasked(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return req.Body == nil || req.Body == http.NoBody
	}
	return false
}
