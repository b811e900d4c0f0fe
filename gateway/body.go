package gateway

import (
	"compress/gzip"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/groupexec/groupexec/gateway/config"
)

// bodyError records why reading a request body failed, for the proxy's error
// handler: the transport reports a failed body read as its own error, and the
// cause must decide the status (413, 408, 400), not the transport's wording.
// The transport reads the body on its own goroutine, hence the lock.
type bodyError struct {
	mu  sync.Mutex
	err error
}

func (b *bodyError) set(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		b.err = err
	}
}

func (b *bodyError) get() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// errBadGzip marks a request whose Content-Encoding says gzip but whose body
// is not gzip.
var errBadGzip = errors.New("gateway: request body is not valid gzip")

// limitBody caps r's body as received and, for a gzip body, as decoded, and
// makes the proxy forward the decoded body. It returns ErrBodyTooLarge at
// once when the declared length is over the cap; other breaches surface as
// read errors while the body streams to the backend, recorded in be.
func limitBody(w http.ResponseWriter, r *http.Request, lim config.Body, be *bodyError) error {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	if r.ContentLength > lim.MaxBytes {
		return ErrBodyTooLarge
	}
	// MaxBytesReader also tells the server to close the connection after
	// the response, rather than read the rest of an oversized body.
	src := &countingReader{r: http.MaxBytesReader(w, r.Body, lim.MaxBytes)}
	var body io.ReadCloser = src
	if strings.EqualFold(strings.TrimSpace(r.Header.Get("Content-Encoding")), "gzip") {
		body = &gzipBody{src: src, lim: lim}
		// The backend gets the decoded body, of a length unknown until read.
		r.Header.Del("Content-Encoding")
		r.Header.Del("Content-Length")
		r.ContentLength = -1
	}
	r.Body = &recordingBody{ReadCloser: body, be: be}
	return nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.ReadCloser
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) Close() error { return c.r.Close() }

// gzipBody decodes a gzip body, refusing more than lim.MaxDecodedBytes in
// all and more than lim.MaxRatio times the bytes received so far. The ratio
// is checked as the body streams, so a small bomb fails after at most
// MaxRatio times its size plus one buffer, not after MaxDecodedBytes. The
// decoder's read-ahead (up to 4 KiB of compressed input) makes the check that
// much lenient.
type gzipBody struct {
	src     *countingReader
	lim     config.Body
	zr      *gzip.Reader
	decoded int64
}

func (g *gzipBody) Read(p []byte) (int, error) {
	if g.zr == nil {
		// Created on first read: NewReader reads the gzip header, which must
		// happen in the proxy's request writer, not before admission.
		zr, err := gzip.NewReader(g.src)
		if err != nil {
			if isCapError(err) {
				return 0, err
			}
			return 0, errBadGzip
		}
		g.zr = zr
	}
	n, err := g.zr.Read(p)
	g.decoded += int64(n)
	if g.decoded > g.lim.MaxDecodedBytes || g.decoded > g.lim.MaxRatio*g.src.n {
		return n, ErrBodyTooLarge
	}
	if err != nil && err != io.EOF && !isCapError(err) {
		err = errBadGzip
	}
	return n, err
}

func (g *gzipBody) Close() error { return g.src.Close() }

// isCapError reports whether err is the received-size cap or a read timeout,
// which keep their own meaning through the decoder.
func isCapError(err error) bool {
	var mbe *http.MaxBytesError
	var ne net.Error
	return errors.As(err, &mbe) || (errors.As(err, &ne) && ne.Timeout())
}

// recordingBody records the first read error's meaning in be.
type recordingBody struct {
	io.ReadCloser
	be *bodyError
}

func (b *recordingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		var mbe *http.MaxBytesError
		var ne net.Error
		switch {
		case errors.As(err, &mbe), errors.Is(err, ErrBodyTooLarge):
			b.be.set(ErrBodyTooLarge)
		case errors.As(err, &ne) && ne.Timeout():
			b.be.set(errReadTimeout)
		case errors.Is(err, errBadGzip):
			b.be.set(errBadGzip)
		default:
			b.be.set(errClientBody)
		}
	}
	return n, err
}

var (
	// errReadTimeout marks a body the client did not send within
	// timeouts.read.
	errReadTimeout = errors.New("gateway: timed out reading the request body")
	// errClientBody marks any other failure to read the client's body (the
	// client went away).
	errClientBody = errors.New("gateway: reading the request body failed")
)
