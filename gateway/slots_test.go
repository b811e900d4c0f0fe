package gateway_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// dialRaw opens a connection to the gateway at url for a hand-written
// request; it is closed at the end of the test.
func dialRaw(t *testing.T, url string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Clients that send their bodies slowly hold no execution slot: the body is
// received before the request is admitted, so a light tenant is served at
// once while every slow request is still arriving.
func TestSlowSendersHoldNoSlot(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) })
	gw := start(t, be.URL, minimal+"limits: {global_max_in_flight: 2, max_concurrency_per_group: 4, queue_timeout: 100ms}\n"+
		"timeouts: {read: 1m}\n")
	const slow = 4
	for range slow {
		c := dialRaw(t, gw.url)
		fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nX-Tenant: slow\r\nContent-Length: 100\r\n\r\nx")
	}
	eventually(t, "the slow requests to arrive", func() bool {
		return metric(t, gw.gw.Metrics(), inGatewayGauge) == slow
	})
	if s := gw.gw.Executor().Stats(); s.Running != 0 {
		t.Errorf("%d slots held by requests still being received", s.Running)
	}
	c := client(t)
	for i := range 5 {
		if resp, body := do(t, c, http.MethodGet, gw.url, "light", nil); resp.StatusCode != 200 {
			t.Fatalf("light request %d: %d %q", i, resp.StatusCode, body)
		}
	}
}

// A client that does not read its answer holds no slot once the backend has
// answered, as long as the answer fits in response.buffer_bytes; a longer
// answer is streamed and holds its slot until the client has taken it.
func TestSlowReadersHoldNoSlot(t *testing.T) {
	size := unheldSize()
	big := bytes.Repeat([]byte("x"), size)
	writing := make(chan struct{}, 1)
	// written counts the bytes of the answer the backend has sent: the wait
	// for a kept answer lasts while it grows.
	var written atomic.Int64
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Tenant") == "light" {
			io.WriteString(w, "ok")
			return
		}
		writing <- struct{}{}
		for b := big; len(b) > 0; {
			n, err := w.Write(b[:min(len(b), 64<<10)])
			written.Add(int64(n))
			if err != nil {
				return
			}
			b = b[n:]
		}
	})
	for _, tc := range []struct {
		name   string
		buffer int
		kept   bool
	}{
		{"kept", 2 * size, true},
		{"streamed", 64 << 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := start(t, be.URL, minimal+"limits: {global_max_in_flight: 1, max_concurrency_per_group: 4, queue_timeout: 100ms}\n"+
				fmt.Sprintf("response: {buffer_bytes: %d}\ntimeouts: {write: 1m}\n", tc.buffer))
			written.Store(0)
			c := dialRaw(t, gw.url)
			c.(*net.TCPConn).SetReadBuffer(clientBuffer) // and does not read
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Tenant: reader\r\n\r\n")
			<-writing
			if tc.kept {
				// A gateway that streamed the answer would stop taking it
				// once the sockets are full: the wait would stop moving.
				eventuallyMoving(t, "the backend's answer to be taken", written.Load, func() bool {
					return metric(t, gw.gw.Metrics(), "group_completed_total", "status", "success") == 1
				})
				if got := gw.gw.Executor().Stats().Running; got != 0 {
					t.Fatalf("%d slots held while the client does not read its kept answer", got)
				}
				if resp, body := do(t, client(t), http.MethodGet, gw.url, "light", nil); resp.StatusCode != 200 {
					t.Errorf("light request: %d %q", resp.StatusCode, body)
				}
			} else if got := gw.gw.Executor().Stats().Running; got != 1 {
				t.Fatalf("%d slots held while a streamed answer is not read, want 1", got)
			}
			// The slow client reads its answer in full at last.
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			n, err := io.Copy(io.Discard, resp.Body)
			if err != nil || n != int64(size) {
				t.Errorf("read %d bytes of %d: %v", n, size, err)
			}
		})
	}
}

// clientBuffer is the receive buffer of a client that does not read.
const clientBuffer = 16 << 10

// unheldSize is the size of an answer that the sockets between the gateway
// and a client that does not read cannot hold: more than the gateway's send
// buffer, which Linux grows up to tcp_wmem's maximum, and clientBuffer.
// Streamed, such an answer keeps its slot until the client reads it; the
// smaller it is, the less CPU a test that moves it needs.
func unheldSize() int {
	const slack = 1 << 20
	if b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_wmem"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 3 {
			if n, err := strconv.Atoi(f[2]); err == nil && n > 0 {
				return n + clientBuffer + slack
			}
		}
	}
	return 16 << 20 // elsewhere: far more than the sockets hold
}

// A body larger than body.buffer_bytes is spooled to a file, forwarded
// whole with its length, and the file does not outlive the request.
func TestBodySpooledToFile(t *testing.T) {
	payload := make([]byte, 300<<10)
	rand.Read(payload)
	sum := sha256.Sum256(payload)
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil || r.ContentLength != int64(len(b)) || sha256.Sum256(b) != sum {
			http.Error(w, fmt.Sprintf("got %d bytes, length %d, %v", len(b), r.ContentLength, err), 400)
		}
	})
	dir := t.TempDir()
	gw := start(t, be.URL, minimal+fmt.Sprintf("body: {max_bytes: 1048576, buffer_bytes: 1024, spool_dir: %s}\n", dir))
	c := client(t)
	for _, body := range []io.Reader{bytes.NewReader(payload), unsized{bytes.NewReader(payload)}} {
		if resp, msg := do(t, c, http.MethodPost, gw.url, "a", body); resp.StatusCode != 200 {
			t.Fatalf("%d %q", resp.StatusCode, msg)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("spool files left behind: %v", left)
	}
}

// A backend's answer is kept whole, trailers included; an event stream is
// passed on as it comes.
func TestKeptAnswers(t *testing.T) {
	events := make(chan struct{})
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/trailer":
			w.Header().Set("Trailer", "X-Sum")
			io.WriteString(w, "body")
			w.Header().Set("X-Sum", "42")
		case "/events":
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: one\n\n")
			w.(http.Flusher).Flush()
			<-events
			io.WriteString(w, "data: two\n\n")
		}
	})
	gw := start(t, be.URL, minimal)
	c := client(t)
	resp, body := do(t, c, http.MethodGet, gw.url+"/trailer", "a", nil)
	if body != "body" || resp.Trailer.Get("X-Sum") != "42" {
		t.Errorf("body %q, trailer %v", body, resp.Trailer)
	}

	req, _ := http.NewRequest(http.MethodGet, gw.url+"/events", nil)
	sresp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer sresp.Body.Close()
	line, err := bufio.NewReader(sresp.Body).ReadString('\n')
	if line != "data: one\n" {
		t.Errorf("first event %q, %v", line, err)
	}
	close(events)
}

// A backend that cuts its answer short before any of it reached the client
// gets the client a 502, not a truncated 200.
func TestCutAnswer502(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(1000))
		w.WriteHeader(200)
		io.WriteString(w, "short")
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	gw := start(t, be.URL, minimal+"breaker: {enabled: false}\n")
	resp, body := do(t, client(t), http.MethodGet, gw.url, "a", nil)
	if code, _, _ := refusal(t, body); resp.StatusCode != 502 || code != "backend_error" {
		t.Errorf("%d %q", resp.StatusCode, body)
	}
}

// A light tenant keeps being served while 50 clients misbehave: 25 send
// their bodies a byte at a time and never finish, 25 never read their
// answers. Nothing here depends on the machine's speed: the misbehaving
// requests are all in place before the light tenant is measured, they hold
// no slot once there, and the light tenant's requests run one at a time
// under a limit of 4, so none can wait for a slot.
func TestSlowClientsDoNotStarveALightTenant(t *testing.T) {
	answer := bytes.Repeat([]byte("a"), 48<<10) // kept whole: under response.buffer_bytes
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.Header.Get("X-Tenant") == "reader" {
			w.Write(answer)
		}
	})
	gw := start(t, be.URL, minimal+"limits: {global_max_in_flight: 4, max_concurrency_per_group: 4, queue_timeout: 1s}\n"+
		"tenants: {light: {}, reader: {}, sender: {}}\ntimeouts: {read: 5m, write: 5m}\n")
	const misbehaving = 25
	stop := make(chan struct{})
	var trickling sync.WaitGroup
	for range misbehaving {
		c := dialRaw(t, gw.url)
		io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nX-Tenant: sender\r\nContent-Length: 100000\r\n\r\nx")
		trickling.Go(func() { // a byte now and then, never the whole body
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := c.Write([]byte("x")); err != nil {
						return
					}
				}
			}
		})
	}
	for range misbehaving {
		c := dialRaw(t, gw.url)
		c.(*net.TCPConn).SetReadBuffer(1024) // and never read
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Tenant: reader\r\n\r\n")
	}
	defer func() { close(stop); trickling.Wait() }()
	eventually(t, "every misbehaving request in place", func() bool {
		m := gw.gw.Metrics()
		// The readers' answers are kept and their slots free; the senders
		// are still sending (the readers may be done too, if the kernel
		// took their answers).
		return metric(t, m, "group_completed_total", "group", "reader", "status", "success") == misbehaving &&
			metric(t, m, inGatewayGauge) >= misbehaving
	})

	const light = 40
	c := client(t)
	ok := 0
	for range light {
		if resp, _ := do(t, c, http.MethodGet, gw.url, "light", nil); resp.StatusCode == 200 {
			ok++
		}
	}
	if ok*100 < light*95 {
		t.Errorf("the light tenant got %d of %d requests through (%d%%), want >= 95%%", ok, light, ok*100/light)
	}
	if s := gw.gw.Executor().Stats(); s.Running != 0 {
		t.Errorf("%d slots held by misbehaving clients", s.Running)
	}
	t.Logf("light tenant: %d of %d served beside %d slow senders and %d slow readers", ok, light, misbehaving, misbehaving)
}
