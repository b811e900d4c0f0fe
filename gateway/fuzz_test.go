package gateway_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The request framings FuzzRequestPath sends.
const (
	framingLength    = iota // Content-Length, whole body
	framingShort            // Content-Length longer than the body sent, then a half-close
	framingChunked          // chunked, well formed
	framingRawChunks        // "chunked", then the fuzzed bytes as they are, then a half-close
	framings
)

// The content codings FuzzRequestPath encodes bodies with.
var codings = []string{"", "gzip", "x-gzip", "gzip, identity", "deflate", "gzip, gzip", "br", "identity"}

// limitsBackend is a backend that reports what it received (length and
// hash, in headers) and records the most requests it had at once.
type limitsBackend struct {
	running, most atomic.Int32
	largest       atomic.Int64
}

func (b *limitsBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := b.running.Add(1)
	defer b.running.Add(-1)
	for m := b.most.Load(); n > m && !b.most.CompareAndSwap(m, n); m = b.most.Load() {
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	for l := b.largest.Load(); int64(len(body)) > l && !b.largest.CompareAndSwap(l, int64(len(body))); l = b.largest.Load() {
	}
	sum := sha256.Sum256(body)
	w.Header().Set("X-Sum", hex.EncodeToString(sum[:]))
	w.Header().Set("X-Len", strconv.Itoa(len(body)))
}

// FuzzRequestPath sends requests with fuzzed headers, bodies, framings and
// content codings, three at a time, and checks that the gateway answers 200
// only for a request it received whole (the backend got exactly its decoded
// body), and that the backend never sees more requests at once than
// global_max_in_flight, nor a body larger than max_decoded_bytes.
func FuzzRequestPath(f *testing.F) {
	const maxDecoded = 8192
	be := &limitsBackend{}
	gw := start(f, backend(f, be.ServeHTTP).URL, minimal+"limits: {global_max_in_flight: 1, max_concurrency_per_group: 4, max_in_flight_per_group: 16}\n"+
		fmt.Sprintf("body: {max_bytes: 4096, max_decoded_bytes: %d, max_ratio: 20, buffer_bytes: 1024}\ntimeouts: {read: 1s}\n", maxDecoded))
	addr := strings.TrimPrefix(gw.url, "http://")
	for _, s := range []struct {
		method, header string
		body           []byte
		framing, code  uint8
	}{
		{"POST", "X-A: b", []byte("hello"), framingLength, 0},
		{"PUT", "", bytes.Repeat([]byte("z"), 5000), framingLength, 1},
		{"POST", "", []byte("abc"), framingShort, 0},
		{"POST", "Expect: 100-continue", []byte("hello"), framingChunked, 2},
		{"POST", "", []byte("5\r\nhello\r\n0\r\n\r\n"), framingRawChunks, 0},
		{"POST", "", []byte("zz\r\n"), framingRawChunks, 0},
		{"POST", "", make([]byte, 3000), framingChunked, 1},
		{"POST", "", []byte("x"), framingLength, 6},
		{"GET", "Content-Length: 5", []byte("hello"), framingChunked, 0},
		{"POST", "Transfer-Encoding: gzip", []byte("hello"), framingLength, 4},
		{"PATCH", "X-Tenant: b", bytes.Repeat([]byte("ab"), 100), framingLength, 5},
		{"DELETE", "", nil, framingLength, 7},
	} {
		f.Add(s.method, s.header, s.body, s.framing, s.code)
	}
	f.Fuzz(func(t *testing.T, method, header string, plain []byte, framing, code uint8) {
		if method == "" || strings.ContainsAny(method, " \r\n\t") {
			method = "POST"
		}
		header = strings.NewReplacer("\r", "", "\n", "").Replace(header)
		coding := codings[int(code)%len(codings)]
		body := encode(plain, coding)
		raw, complete, want, known := request(method, header, coding, body, plain, framing%framings)

		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				resp, err := exchange(addr, method, raw, !complete)
				if err != nil {
					return // the gateway closed the connection: no 200 either
				}
				if resp.StatusCode != 200 {
					return
				}
				switch {
				case !complete:
					t.Errorf("200 for a request not received whole: %q", raw)
				case !known:
					if coding == "br" {
						t.Errorf("200 for a body the gateway cannot decode: %q", raw)
					}
				case resp.Header.Get("X-Len") != strconv.Itoa(len(want)) || resp.Header.Get("X-Sum") != sum(want):
					t.Errorf("200, but the backend got %s bytes, want %d: %q", resp.Header.Get("X-Len"), len(want), raw)
				}
			})
		}
		wg.Wait()
		if m := be.most.Load(); m > 1 {
			t.Fatalf("the backend had %d requests at once, global_max_in_flight is 1", m)
		}
		if l := be.largest.Load(); l > maxDecoded {
			t.Fatalf("the backend got a body of %d bytes, max_decoded_bytes is %d", l, maxDecoded)
		}
	})
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// encode applies coding to plain, as a client would.
func encode(plain []byte, coding string) []byte {
	b := plain
	for c := range strings.SplitSeq(coding, ",") {
		var buf bytes.Buffer
		switch strings.TrimSpace(c) {
		case "gzip", "x-gzip":
			zw := gzip.NewWriter(&buf)
			zw.Write(b)
			zw.Close()
		case "deflate":
			zw := zlib.NewWriter(&buf)
			zw.Write(b)
			zw.Close()
		default:
			continue
		}
		b = buf.Bytes()
	}
	return b
}

// request writes the raw request and says whether it is complete and, if
// known, what body the backend must have got if it is answered 200.
func request(method, header, coding string, body, plain []byte, framing uint8) (raw []byte, complete bool, want []byte, known bool) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\n", method)
	if header != "" {
		b.WriteString(header + "\r\n")
	}
	if coding != "" {
		b.WriteString("Content-Encoding: " + coding + "\r\n")
	}
	want, known = plain, coding != "br" // br cannot be decoded: it must be refused
	switch framing {
	case framingLength:
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(body))
		b.Write(body)
		complete = true
	case framingShort:
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(body)+1)
		b.Write(body)
	case framingChunked:
		b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		cw := httputil.NewChunkedWriter(&b)
		cw.Write(body)
		cw.Close()
		b.WriteString("\r\n")
		complete = true
	case framingRawChunks:
		b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		b.Write(body)
		// Complete only if the fuzzed bytes are a whole chunked body.
		decoded, err := io.ReadAll(httputil.NewChunkedReader(bytes.NewReader(body)))
		complete = err == nil
		// A coded body framed by fuzzed chunks is not checked here.
		want, known = decoded, known && coding == ""
	}
	return b.Bytes(), complete, want, known
}

// exchange sends raw on a new connection (closing the write side after it
// when halfClose is set) and reads the first response.
func exchange(addr, method string, raw []byte, halfClose bool) (*http.Response, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(bound))
	go func() {
		c.Write(raw)
		if halfClose {
			c.(*net.TCPConn).CloseWrite()
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method}) // a HEAD's answer has no body
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}
