package gateway

import (
	"bufio"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"strings"

	"github.com/groupexec/groupexec/gateway/config"
)

// maxCodings is how many content codings a request body may stack.
const maxCodings = 2

// bodyError is why a request body could not be received: the status, the
// refusal code and the rejected_total reason it is answered with.
type bodyError struct {
	status int
	code   string // the JSON body's error
	reason string // rejected_total's reason label
	msg    string
}

func (e *bodyError) Error() string { return e.msg }

var (
	errBodyTooLarge = &bodyError{http.StatusRequestEntityTooLarge, "body_too_large", "body-size",
		"the request body is over body.max_bytes"}
	errDecodedSize = &bodyError{http.StatusRequestEntityTooLarge, "body_too_large", "decoded-size",
		"the decoded request body is over body.max_decoded_bytes"}
	errDecodedRatio = &bodyError{http.StatusRequestEntityTooLarge, "body_too_large", "decoded-ratio",
		"the request body decodes to more than body.max_ratio times its size"}
	errReadTimeout = &bodyError{http.StatusRequestTimeout, "read_timeout", "read-timeout",
		"the request body was not received within timeouts.read"}
	errBadEncoding = &bodyError{http.StatusBadRequest, "bad_encoding", "bad-encoding",
		"the request body is not valid for its Content-Encoding"}
	errUnsupportedEncoding = &bodyError{http.StatusUnsupportedMediaType, "unsupported_encoding", "unsupported-encoding",
		"the request body's Content-Encoding is not one of gzip, x-gzip, deflate, identity (at most 2 stacked)"}
	errBadBody = &bodyError{http.StatusBadRequest, "bad_body", "bad-body",
		"the request body did not arrive whole (malformed chunks, or cut short)"}
	errSpool = &bodyError{http.StatusInternalServerError, "spool_failed", "spool-failed",
		"the gateway could not store the request body"}
)

// decoders lists the content codings of a request body, outermost first
// (the reverse of the header's order), without identity. ok is false for a
// coding the gateway cannot decode or more than maxCodings: every coded
// body is decoded here, under the caps, so that none reaches a backend
// unchecked. x-gzip is gzip (RFC 9110 8.4.1.3).
func decoders(h http.Header) (codings []string, ok bool) {
	for _, line := range h.Values("Content-Encoding") {
		for c := range strings.SplitSeq(line, ",") {
			switch c = strings.ToLower(strings.TrimSpace(c)); c {
			case "", "identity":
			case "gzip", "x-gzip", "deflate":
				if len(codings) == maxCodings {
					return nil, false
				}
				codings = append(codings, c)
			default:
				return nil, false
			}
		}
	}
	for i, j := 0, len(codings)-1; i < j; i, j = i+1, j-1 {
		codings[i], codings[j] = codings[j], codings[i]
	}
	return codings, true
}

// receive reads r's whole body into sp, decoded, under lim, and points r
// at the spooled copy with its length and without its trailers. It runs
// before admission, so a slow or broken client holds no execution slot,
// nor its tenant's place among the tracked groups.
// It returns a *bodyError. A request without a body is only checked for
// its Content-Encoding.
func receive(w http.ResponseWriter, r *http.Request, lim *config.Body, sp *spool) error {
	codings, ok := decoders(r.Header)
	if !ok {
		return errUnsupportedEncoding
	}
	if r.Body == nil || r.Body == http.NoBody {
		if len(codings) > 0 || r.Header["Content-Encoding"] != nil {
			r.Header.Del("Content-Encoding") // nothing coded to pass on
		}
		return nil
	}
	if r.ContentLength > lim.MaxBytes {
		return errBodyTooLarge
	}
	// MaxBytesReader also tells the server to close the connection rather
	// than read the rest of an oversized body.
	src := &sourceReader{r: http.MaxBytesReader(w, r.Body, lim.MaxBytes)}
	var in io.Reader = src
	// Each decoder reads through a bufio.Reader of its own: being an
	// io.ByteReader, it makes the decoder take no more than its stream, so
	// that what follows the stream can be seen (and refused) below.
	//
	// Every layer's output is capped, not only the last's: a layer may
	// decode to megabytes of a stream that the next decodes to nothing (a
	// deflate stream of empty blocks, 5 bytes each, compresses about 700
	// times), which the caps on the last layer never see, and decoding it
	// is CPU-bound work that no read deadline interrupts while the
	// decoder's input lasts.
	var layers []*bufio.Reader
	for _, c := range codings {
		br := bufio.NewReader(in)
		layers = append(layers, br)
		var err error
		if in, err = decoder(c, br); err != nil {
			return bodyErr(src, errBadEncoding)
		}
		in = &capReader{r: in, src: src, lim: lim}
	}
	sp.threshold, sp.dir, sp.lim = lim.BufferBytes, lim.SpoolDir, lim
	buf := proxyBufs.Get().(*[32 << 10]byte)
	_, err := io.CopyBuffer(onlyWriter{sp}, in, buf[:])
	proxyBufs.Put(buf)
	if err != nil {
		var be *bodyError
		if errors.As(err, &be) {
			return be
		}
		if src.err == nil && !errors.Is(err, io.ErrUnexpectedEOF) && !isDecodeError(err) {
			return errSpool // the spool's write failed
		}
		return bodyErr(src, errBadEncoding)
	}
	// A decoder stops at the end of its stream: its input must end there
	// too, with nothing after it, and the body must have been received
	// whole.
	for i := len(layers) - 1; i >= 0; i-- {
		switch _, err := layers[i].ReadByte(); {
		case err == nil:
			return errBadEncoding
		case err != io.EOF:
			return bodyErr(src, errBadEncoding)
		}
	}
	// Decoded, or identity only: either way the backend gets it plain.
	r.Header.Del("Content-Encoding")
	r.Header.Del("Expect") // the body is here: the backend need not be asked
	r.ContentLength = sp.size()
	r.TransferEncoding = nil
	r.Body = sp.body()
	// The client's trailers, in now, are dropped with the framing: a
	// trailer (which a backend may merge into the header) could name
	// another tenant or client address than the gateway's. net/http's
	// HTTP/1 transport sends trailers only with a chunked body, but its
	// HTTP/2 one, to an https backend, sends them whatever the framing.
	r.Trailer = nil
	return nil
}

func decoder(coding string, in io.Reader) (io.Reader, error) {
	if coding == "deflate" {
		return zlib.NewReader(in)
	}
	return gzip.NewReader(in)
}

// isDecodeError reports whether err is a decoder's complaint about its
// input.
func isDecodeError(err error) bool {
	return errors.Is(err, gzip.ErrHeader) || errors.Is(err, gzip.ErrChecksum) ||
		errors.Is(err, zlib.ErrHeader) || errors.Is(err, zlib.ErrChecksum) ||
		errors.Is(err, zlib.ErrDictionary) || strings.HasPrefix(err.Error(), "flate:")
}

// bodyErr returns what a failed read means: the source's own failure if it
// had one (too large, too slow, cut short), else decodeErr.
func bodyErr(src *sourceReader, decodeErr *bodyError) *bodyError {
	var mbe *http.MaxBytesError
	var ne net.Error
	switch err := src.err; {
	case err == nil:
		return decodeErr
	case errors.As(err, &mbe):
		return errBodyTooLarge
	case errors.As(err, &ne) && ne.Timeout():
		return errReadTimeout
	default:
		return errBadBody
	}
}

// sourceReader counts the bytes received and keeps the first error other
// than io.EOF, so that a decoder's error can be told from the client's.
type sourceReader struct {
	r   io.Reader
	n   int64
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.n += int64(n)
	if err != nil && err != io.EOF && s.err == nil {
		s.err = err
	}
	return n, err
}

// capReader bounds one decoded layer of a body (the body itself, for the
// last): at most lim.MaxDecodedBytes in all, and
// at most lim.MaxRatio times the bytes received so far. The ratio is checked
// as the body streams, so a small bomb fails after at most MaxRatio times
// its size plus one buffer, not after MaxDecodedBytes; the decoders'
// read-ahead (a few KiB of input) makes the check that much lenient.
type capReader struct {
	r       io.Reader
	src     *sourceReader
	lim     *config.Body
	decoded int64
}

func (c *capReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.decoded += int64(n)
	switch {
	case c.decoded > c.lim.MaxDecodedBytes:
		return n, errDecodedSize
	case c.decoded > ratioCap(c.lim.MaxRatio, c.src.n):
		return n, errDecodedRatio
	}
	return n, err
}

// ratioCap is ratio times the received bytes (at least 1), or the largest
// int64 where the product would overflow: a ratio that large caps nothing.
func ratioCap(ratio, received int64) int64 {
	received = max(received, 1)
	if ratio > math.MaxInt64/received {
		return math.MaxInt64
	}
	return ratio * received
}

// onlyWriter hides the spool's other methods from io.CopyBuffer, which
// would otherwise look for ReadFrom.
type onlyWriter struct{ w io.Writer }

func (o onlyWriter) Write(p []byte) (int, error) { return o.w.Write(p) }
