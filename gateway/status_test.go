package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestProxies(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s tenant=%s xff=%v", r.Method, r.URL.Path, r.Header.Get("X-Tenant"), r.Header.Get("X-Forwarded-For") != "")
	})
	gw := start(t, be.URL+"/base", minimal)
	resp, body := do(t, client(t), http.MethodGet, gw.url+"/x/y", "acme", nil)
	if resp.StatusCode != 200 || body != "GET /base/x/y tenant=acme xff=true" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
}

// A tenant over its bulkhead gets 429 with Retry-After and the limit named;
// another tenant is served meanwhile.
func TestRejected429(t *testing.T) {
	g, gw := gated(t, minimal+"limits: {max_in_flight_per_group: 1, max_concurrency_per_group: 1}\n", "light")
	c := client(t)
	done := goDo(t, c, gw.url, "flood")
	g.await(t, 1)

	resp, body := do(t, c, http.MethodGet, gw.url, "flood", nil)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429", resp.StatusCode)
	}
	if ra := resp.Header.Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After %q", ra)
	}
	if code, reason, tenant := refusal(t, body); code != "rejected" || !strings.Contains(reason, "group in-flight") || tenant != "flood" {
		t.Errorf("body %q", body)
	}
	if got := metric(t, gw.gw.Metrics(), "busy_rejections_total", "endpoint", "proxy"); got != 1 {
		t.Errorf("busy_rejections_total = %v", got)
	}
	if got := metric(t, gw.gw.Metrics(), "group_rejected_total", "group", "_other", "limit", "group_in-flight"); got != 1 {
		t.Errorf("group_rejected_total = %v", got)
	}

	if resp, _ := do(t, c, http.MethodGet, gw.url, "light", nil); resp.StatusCode != 200 {
		t.Errorf("other tenant: %d", resp.StatusCode)
	}
	close(g.release)
	if code := <-done; code != 200 {
		t.Errorf("first request: %d", code)
	}
}

func TestQueueTimeout429(t *testing.T) {
	g, gw := gated(t, minimal+"limits: {max_concurrency_per_group: 1, queue_timeout: 20ms}\n")
	c := client(t)
	done := goDo(t, c, gw.url, "a")
	g.await(t, 1)
	resp, body := do(t, c, http.MethodGet, gw.url, "a", nil)
	if code, reason, _ := refusal(t, body); resp.StatusCode != 429 || code != "rejected" || !strings.Contains(reason, "queue timeout") {
		t.Errorf("%d %q", resp.StatusCode, body)
	}
	close(g.release)
	<-done
}

// deadBackend returns the URL of a loopback port that refuses connections
// for as long as the test runs: a socket bound to it that never listens
// holds it, so that a dial is refused and no other socket can take the
// port. The port of a listener closed again was free for anyone: a server
// that another test, run at the same time, started on it answered for the
// dead backend.
func deadBackend(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	syscall.CloseOnExec(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}

func TestBackendDown502(t *testing.T) {
	gw := start(t, deadBackend(t), minimal)
	resp, body := do(t, client(t), http.MethodPost, gw.url, "a", strings.NewReader("x"))
	if code, _, _ := refusal(t, body); resp.StatusCode != 502 || code != "backend_error" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	c := client(t)
	if code, body := get(t, c, gw.admin+"/readyz"); code != 503 || !strings.Contains(body, "no backend") {
		t.Errorf("readyz: %d %q", code, body)
	}
	if code, _ := get(t, c, gw.admin+"/healthz"); code != 200 {
		t.Errorf("healthz: %d", code)
	}
	if got := metric(t, gw.gw.Metrics(), "gateway_degraded"); got != 1 {
		t.Errorf("gateway_degraded = %v", got)
	}
}

// A backend answering a status outside 100-599, which is no HTTP status
// (RFC 9110 15: a client processes it as a 5xx), has failed: 502, not
// passed on. One under 100 was passed on as 200, with the backend's body
// or, without one, as an empty 200 counted as a client gone from the
// queue; one over 599 reached the client as sent.
func TestBackendStatusOutOfRange502(t *testing.T) {
	for _, status := range []string{"000", "099", "600", "999"} {
		for _, body := range []string{"", "hello"} {
			url, _ := hijacker(t, func(conn net.Conn, brw *bufio.ReadWriter) {
				defer conn.Close()
				fmt.Fprintf(brw, "HTTP/1.1 %s Odd\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", status, len(body), body)
				brw.Flush()
			})
			gw := start(t, url, minimal)
			resp, got := do(t, client(t), http.MethodGet, gw.url, "a", nil)
			if resp.StatusCode != 502 {
				t.Errorf("status %s, body %q: answered %d %q, want 502", status, body, resp.StatusCode, got)
			} else if code, _, _ := refusal(t, got); code != "backend_error" {
				t.Errorf("status %s, body %q: answered 502 %s, want backend_error", status, body, code)
			}
			m := gw.gw.Metrics()
			if n := metric(t, m, requestsTotal, "code", "502"); n != 1 {
				t.Errorf("status %s, body %q: %s{code=502} = %v, want 1", status, body, requestsTotal, n)
			}
			if n := metric(t, m, "queue_dropped_total", "queue", "tenant"); n != 0 {
				t.Errorf("status %s, body %q: queue_dropped_total = %v, want 0", status, body, n)
			}
		}
	}
}

// A backend slower than the request's deadline gives 504 when the deadline
// passes, and the backend's request is cancelled.
//
// The 100ms run from the request's arrival: a stall of the machine before
// the backend gets the request lets them pass with no request there to
// cancel (and one before the admission, with a 504 for the queue's
// deadline). Such a request is sent again, on a path of its own, until one
// reaches the backend before the gateway gives up; the backend's breaker
// is off, so that those failures do not open it.
func TestBackendDeadline504(t *testing.T) {
	var mu sync.Mutex
	cancelled := map[string]chan struct{}{} // by path: closed once the backend's request ends
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		ended := make(chan struct{})
		mu.Lock()
		cancelled[r.URL.Path] = ended
		mu.Unlock()
		<-r.Context().Done()
		close(ended)
	})
	gw := start(t, be.URL, minimal+"timeouts: {upstream: 100ms}\nbreaker: {enabled: false}\n")
	c := client(t)
	m := gw.gw.Metrics()
	for i, deadline := 0, time.Now().Add(bound); ; i++ {
		path := fmt.Sprintf("/%d", i)
		before := metric(t, m, "io_timeouts_total", "op", "upstream")
		resp, body := do(t, c, http.MethodGet, gw.url+path, "slow", nil)
		// The backend's request, if it had one, was registered before its
		// context ended, and so before the gateway gave up and answered.
		mu.Lock()
		ended := cancelled[path]
		mu.Unlock()
		if ended == nil {
			if time.Now().After(deadline) {
				t.Fatalf("no request reached the backend within its 100ms in %v of tries", bound)
			}
			continue
		}
		if code, _, _ := refusal(t, body); resp.StatusCode != 504 || code != "upstream_timeout" {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
		select {
		case <-ended:
		case <-time.After(bound):
			t.Fatal("the backend's request was not cancelled at the deadline")
		}
		if got := metric(t, m, "io_timeouts_total", "op", "upstream") - before; got != 1 {
			t.Errorf("io_timeouts_total{op=upstream} went up by %v, want 1", got)
		}
		return
	}
}

// flaky is a backend that cuts the connection of its first n requests.
func flaky(t *testing.T, n int32) (url string, hits *atomic.Int32) {
	hits = new(atomic.Int32)
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if hits.Add(1) <= n {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		io.WriteString(w, "ok")
	})
	return be.URL, hits
}

func TestRetriesOnlyIdempotentWithoutBody(t *testing.T) {
	for _, tc := range []struct {
		method string
		body   string
		want   int   // status
		hits   int32 // backend requests
	}{
		{http.MethodGet, "", 200, 3},
		{http.MethodDelete, "", 200, 3},
		{http.MethodPost, "", 502, 1},
		{http.MethodPatch, "x", 502, 1},
		{http.MethodPut, "x", 502, 1}, // idempotent, but a streamed body cannot be sent twice
	} {
		t.Run(tc.method, func(t *testing.T) {
			url, hits := flaky(t, 2)
			gw := start(t, url, minimal)
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			resp, _ := do(t, client(t), tc.method, gw.url, "a", body)
			if resp.StatusCode != tc.want || hits.Load() != tc.hits {
				t.Errorf("status %d after %d backend requests, want %d after %d", resp.StatusCode, hits.Load(), tc.want, tc.hits)
			}
			if got, want := metric(t, gw.gw.Metrics(), "backoff_retries_total", "op", "upstream"), float64(tc.hits-1); got != want {
				t.Errorf("backoff_retries_total = %v, want %v", got, want)
			}
		})
	}
}

// At most 3 tries, then the error.
func TestRetriesGiveUp(t *testing.T) {
	url, hits := flaky(t, 100)
	gw := start(t, url, minimal)
	if resp, _ := do(t, client(t), http.MethodGet, gw.url, "a", nil); resp.StatusCode != 502 || hits.Load() != 3 {
		t.Errorf("status %d after %d tries", resp.StatusCode, hits.Load())
	}
}

// No retry wait is started past the deadline.
//
// The first try must reach the backend within the 45ms: a stall of the
// machine between the request's arrival and its dial leaves it no try at
// all, which says nothing of retries. Such a request is sent again, on a
// path of its own (a try of it sent but read late counts for it alone),
// until one reaches the backend; without a breaker, which those failures
// would open.
func TestRetriesStayInsideDeadline(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	})
	gw := start(t, be.URL, minimal+"timeouts: {upstream: 45ms}\nbreaker: {enabled: false}\n")
	c := client(t)
	for i, deadline := 0, time.Now().Add(bound); ; i++ {
		path := fmt.Sprintf("/%d", i)
		resp, _ := do(t, c, http.MethodGet, gw.url+path, "a", nil)
		mu.Lock()
		tries := hits[path]
		mu.Unlock()
		if tries == 0 && time.Now().Before(deadline) {
			continue
		}
		if resp.StatusCode != 502 && resp.StatusCode != 504 {
			t.Errorf("status %d", resp.StatusCode)
		}
		if tries != 1 { // the first wait (>= 50ms) would end past the 45ms deadline
			t.Errorf("%d tries", tries)
		}
		return
	}
}

func TestInvalidTenant400(t *testing.T) {
	be := backend(t, func(http.ResponseWriter, *http.Request) { t.Error("backend reached") })
	gw := start(t, be.URL, minimal)
	resp, body := do(t, client(t), http.MethodGet, gw.url, "_overflow", nil)
	if code, _, _ := refusal(t, body); resp.StatusCode != 400 || code != "invalid_tenant" {
		t.Errorf("%d %q", resp.StatusCode, body)
	}
}

func TestHeaderCap431(t *testing.T) {
	be := backend(t, func(http.ResponseWriter, *http.Request) {})
	gw := start(t, be.URL, minimal+"max_header_bytes: 1024\n")
	resp, _ := do(t, client(t), http.MethodGet, gw.url, "a", nil, "X-Big", strings.Repeat("b", 8<<10))
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("status %d", resp.StatusCode)
	}
}

func TestDefaultTenant(t *testing.T) {
	be := backend(t, func(http.ResponseWriter, *http.Request) {})
	gw := start(t, be.URL, minimal+"tenant: {default: anon}\n")
	do(t, client(t), http.MethodGet, gw.url, "", nil)
	if got := metric(t, gw.gw.Metrics(), "gateway_requests_total", "tenant", "anon", "code", "200"); got != 1 {
		t.Errorf("requests of the default tenant = %v", got)
	}
}

// With tenant.from: path, a request whose path a backend may read as
// another tenant's (a "..;" segment, a backslash) is refused 400
// invalid_tenant, as "//t/acme" is, and never reaches the backend.
func TestLenientPathRefused400(t *testing.T) {
	be := backend(t, func(http.ResponseWriter, *http.Request) { t.Error("backend reached") })
	gw := start(t, be.URL, minimal+"tenant: {from: path, path_prefix: /t}\n")
	for _, target := range []string{"/t/acme/..;/..;/t/beta/x", `/x\..\t/acme/x`, `/t\acme/x`, "//t/acme/x"} {
		c := dialRaw(t, gw.url)
		c.SetDeadline(time.Now().Add(bound))
		io.WriteString(c, "GET "+target+" HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if code, _, _ := refusal(t, string(body)); resp.StatusCode != 400 || code != "invalid_tenant" {
			t.Errorf("%s: %d %q, want 400 invalid_tenant", target, resp.StatusCode, body)
		}
	}
}

// With tenant.from: path, a key that is a configured tenant's only in
// another case ("/t/ACME" beside "acme") is refused 400 invalid_tenant and
// never reaches the backend, which may match paths without regard to case
// and serve acme's path under the default limits. The tenant's own
// spelling is served, and an unconfigured key keeps its case.
func TestPathTenantInAnotherCaseRefused(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Header.Get("X-Tenant"))
	})
	gw := start(t, be.URL, minimal+"tenant: {from: path, path_prefix: /t, default: anon}\ntenants: {acme: {share: 2}, Beta: {share: 2}}\n")
	c := client(t)
	for _, p := range []string{"/t/ACME/x", "/t/Acme", "/t/beta/x", "/t/BETA", "/t/Anon/x"} {
		resp, body := do(t, c, http.MethodGet, gw.url+p, "", nil)
		if resp.StatusCode != 400 {
			t.Errorf("%s: %d, the backend was told tenant %q; want 400 invalid_tenant", p, resp.StatusCode, body)
			continue
		}
		if code, _, _ := refusal(t, body); code != "invalid_tenant" {
			t.Errorf("%s: %d %q, want 400 invalid_tenant", p, resp.StatusCode, body)
		}
	}
	for p, want := range map[string]string{"/t/acme/x": "acme", "/t/Beta": "Beta", "/t/Other/x": "Other", "/t/other": "other", "/x": "anon"} {
		if resp, body := do(t, c, http.MethodGet, gw.url+p, "", nil); resp.StatusCode != 200 || body != want {
			t.Errorf("%s: %d, the backend was told tenant %q; want 200 for %q", p, resp.StatusCode, body, want)
		}
	}
}

// Timeouts each long enough to mean "never" (here over a century), whose
// sum is past what a time.Duration holds, still let a request through: the
// write deadline, which runs to the end of timeouts.read, upstream and
// write from the request's start, stops at the longest one there is
// instead of wrapping into the past, where it failed the server's
// "100 Continue" and so every request whose client waits for one.
func TestHugeTimeoutsStillAnswer(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	})
	gw := start(t, be.URL, minimal+"timeouts: {read: 1000000h, upstream: 1000000h, write: 1000000h}\n")
	c := dialRaw(t, gw.url)
	c.SetDeadline(time.Now().Add(bound))
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusContinue {
		t.Fatalf("no 100 Continue: %v %v", resp, err)
	}
	io.WriteString(c, "ok")
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || string(b) != "ok" {
		t.Errorf("%d %q %v, want 200 ok", resp.StatusCode, b, err)
	}
}
