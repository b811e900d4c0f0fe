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
// hash, in headers), and records which of its requests it had at once and
// which it read whole.
//
// A request whose client goes away while the backend still runs it (a
// client that hangs up mid-body, or the gateway's cancel reaching the
// backend as a closed connection) ends the gateway's part of it, and its
// permit, before the backend's handler returns: the gateway cannot know
// when the backend lets go of a request it abandoned. So an overlap counts
// against global_max_in_flight only between two requests that both read
// their body whole and were not cancelled.
type limitsBackend struct {
	mu       sync.Mutex
	live     map[*backendRequest]bool
	overlaps [][2]*backendRequest // pairs of requests that ran at once, not yet judged
	largest  atomic.Int64
}

type backendRequest struct {
	done, whole bool // guarded by limitsBackend.mu
}

func (b *limitsBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	me := new(backendRequest)
	b.mu.Lock()
	if b.live == nil {
		b.live = make(map[*backendRequest]bool)
	}
	for o := range b.live {
		b.overlaps = append(b.overlaps, [2]*backendRequest{o, me})
	}
	b.live[me] = true
	b.mu.Unlock()
	body, err := io.ReadAll(r.Body)
	defer func() {
		b.mu.Lock()
		delete(b.live, me)
		me.done, me.whole = true, err == nil && r.Context().Err() == nil
		b.mu.Unlock()
	}()
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

// overlapped reports whether two requests that both read their body whole
// ran at once, judging the pairs whose requests have both ended.
func (b *limitsBackend) overlapped() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	pending := b.overlaps[:0]
	found := false
	for _, p := range b.overlaps {
		switch {
		case !p[0].done || !p[1].done:
			pending = append(pending, p)
		case p[0].whole && p[1].whole:
			found = true
		}
	}
	b.overlaps = pending
	return found
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
		if be.overlapped() {
			t.Fatal("the backend had two requests at once, both read whole, and global_max_in_flight is 1")
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
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: method}) // a HEAD's answer has no body
	// Interim answers (100 Continue) come before the answer, as
	// net/http's client reads them: a client that hung up after one would
	// abandon its request while the gateway still runs it.
	for err == nil && resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
		resp, err = http.ReadResponse(br, &http.Request{Method: method})
	}
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}
