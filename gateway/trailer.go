package gateway

import (
	"io"
	"net/http"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// dropForbiddenTrailers is the proxy's ModifyResponse: it keeps a backend's
// answer from passing on trailers that RFC 9110 6.5.1 forbids, the fields
// a recipient must have before the content (framing, routing,
// authentication, request modifiers, response controls, content format).
// The proxy announces res.Trailer's names in the Trailer header it sends,
// and passes on every trailer that arrives at the body's end, announced
// or not, which net/http's HTTP/1 server then sends as they are: a
// Content-Length, Transfer-Encoding or Host trailer reached the client,
// to be merged by one that folds trailers into the headers, or a front
// proxy that does, with those of the gateway's answer. The announced
// names are dropped here, and those that arrive by the body (forbidTrailers).
//
// The list is Go's (httpguts.ValidTrailerHeader): the one net/http's
// HTTP/2 server applies to every trailer, and its HTTP/1 server to the
// names of the Trailer header alone, so that an answer's trailers are the
// same to an HTTP/1 client as to an HTTP/2 one. It has the framing and
// hop-by-hop fields, Host, the credentials and their challenges,
// Content-Type and -Encoding, caching and range fields and If-*.
//
// Set-Cookie, which Go's list lets through, is dropped too: a cookie is
// part of how the answer is handled, state the client keeps from the
// headers on, which 6.5.1 keeps out of trailers, and browsers ignore it
// there. Passed on, it reached a client or front proxy that folds
// trailers into the headers as a cookie no filter of the answer's headers
// (a front proxy's, a WAF's) had seen, set by the backend unchecked.
func dropForbiddenTrailers(res *http.Response) error {
	if res.StatusCode == http.StatusSwitchingProtocols {
		return nil // its body is the backend's connection, which the proxy takes over
	}
	dropForbidden(res.Trailer)
	// An HTTP/1 answer with a length has no trailers: only chunks carry them.
	if res.Body != nil && res.Body != http.NoBody && (res.ProtoMajor != 1 || res.ContentLength < 0) {
		res.Body = &forbidTrailers{ReadCloser: res.Body, res: res}
	}
	return nil
}

// forbidTrailers is an answer's body that drops the forbidden trailers
// (dropForbiddenTrailers) from its response once they are in: net/http's
// transport sets res.Trailer as it reads the body's end, and the proxy
// copies it when the body is done.
type forbidTrailers struct {
	io.ReadCloser
	res *http.Response
}

func (b *forbidTrailers) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		dropForbidden(b.res.Trailer)
	}
	return n, err
}

func (b *forbidTrailers) Close() error {
	err := b.ReadCloser.Close()
	dropForbidden(b.res.Trailer)
	return err
}

// dropForbidden deletes from h the fields RFC 9110 6.5.1 forbids in
// trailers, and Set-Cookie (dropForbiddenTrailers).
func dropForbidden(h http.Header) {
	for k := range h {
		if !httpguts.ValidTrailerHeader(k) || strings.EqualFold(k, "Set-Cookie") {
			delete(h, k)
		}
	}
}
