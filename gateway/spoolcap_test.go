package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/groupexec/groupexec/gateway"
)

const spoolGauge = "gateway_spool_bytes"

// postHead is the head of a POST for tenant a with a body of n bytes.
func postHead(n int) string {
	return fmt.Sprintf("POST / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\nContent-Length: %d\r\n\r\n", n)
}

// postFrom sends a POST with a body of n bytes from the local address ip
// and returns the answer.
func postFrom(t *testing.T, url, ip string, n int) (*http.Response, string) {
	t.Helper()
	c := dialFrom(t, url, ip)
	io.WriteString(c, postHead(n)+strings.Repeat("x", n))
	return readAnswer(t, c)
}

// answer is what a raw connection's client got: a status, or the error
// that kept it from reading one.
type answer struct {
	status int
	err    error
}

// answerOf reads one response from c, with its body, on a goroutine of
// its own (ending at c's deadline at the latest), and sends what came on
// the channel it returns, which has room for one.
func answerOf(c net.Conn) chan answer {
	answered := make(chan answer, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		answered <- answer{status: resp.StatusCode}
	}()
	return answered
}

// readAnswer reads one response from c, with its body.
func readAnswer(t *testing.T, c net.Conn) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// spoolFull checks that resp is the refusal of a body over the spool's
// caps, over the share of one client address if perClient.
func spoolFull(t *testing.T, resp *http.Response, body string, perClient bool) {
	t.Helper()
	code, reason, _ := refusal(t, body)
	if resp.StatusCode != http.StatusServiceUnavailable || code != "spool_full" || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("%d %v %q; want 503 spool_full with Retry-After: 1", resp.StatusCode, resp.Header, body)
	}
	if got := strings.Contains(reason, "per_client"); got != perClient {
		t.Errorf("reason %q names the client's share: %v, want %v", reason, got, perClient)
	}
}

// spoolTooLarge checks that resp is the refusal of a body that no spool
// room could ever take: 413 body_too_large, without Retry-After.
func spoolTooLarge(t *testing.T, resp *http.Response, body string) {
	t.Helper()
	code, _, _ := refusal(t, body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || code != "body_too_large" || resp.Header.Get("Retry-After") != "" {
		t.Fatalf("%d %v %q; want 413 body_too_large without Retry-After", resp.StatusCode, resp.Header, body)
	}
}

// spoolEmpty waits until no byte is counted in spool files, and no client.
func spoolEmpty(t *testing.T, gw *running) {
	t.Helper()
	eventually(t, "the spool's bytes given back", func() bool {
		return metric(t, gw.gw.Metrics(), spoolGauge) == 0 && gateway.SpoolClients(gw.gw) == 0
	})
}

// A body that would take the spool over body.spool_max_bytes is refused
// 503 spool_full before admission, and the room an earlier body held is
// free again once its request has ended.
func TestSpoolMaxBytes(t *testing.T) {
	gw := start(t, echo(t), minimal+
		"body: {buffer_bytes: 0, spool_max_bytes: 1000, spool_max_bytes_per_client: 1000}\ntimeouts: {read: 1h}\n")
	m := gw.gw.Metrics()
	held := dialFrom(t, gw.url, "127.0.0.2")
	io.WriteString(held, postHead(1000)+strings.Repeat("x", 600))
	eventually(t, "the held body's 600 bytes spooled", func() bool { return metric(t, m, spoolGauge) == 600 })

	resp, body := postFrom(t, gw.url, "127.0.0.3", 500)
	spoolFull(t, resp, body, false)
	if got := metric(t, m, "rejected_total", "reason", "spool-full"); got != 1 {
		t.Errorf("rejected_total{reason=spool-full} = %v, want 1", got)
	}
	if got := metric(t, m, "tasks_spawned_total"); got != 0 {
		t.Errorf("%v requests admitted, want 0: the refusal comes before admission", got)
	}
	eventually(t, "the refused body's bytes given back", func() bool { return metric(t, m, spoolGauge) == 600 })

	io.WriteString(held, strings.Repeat("x", 400))
	if resp, body := readAnswer(t, held); resp.StatusCode != 200 || resp.Header.Get("X-Got") != "1000," {
		t.Fatalf("the held body, sent whole at the cap: %d %q, backend got %q", resp.StatusCode, body, resp.Header.Get("X-Got"))
	}
	spoolEmpty(t, gw)
	if resp, body := postFrom(t, gw.url, "127.0.0.3", 500); resp.StatusCode != 200 {
		t.Fatalf("a body once the room is free: %d %q", resp.StatusCode, body)
	}
	spoolEmpty(t, gw)
}

// One client address at body.spool_max_bytes_per_client has its next body
// refused while another address's is received; a trusted proxy's bodies
// are many clients', and count against the total only.
func TestSpoolMaxBytesPerClient(t *testing.T) {
	const heavy = "127.0.0.2"
	for _, tc := range []struct {
		name, tenant string
		capped       bool
	}{
		{"untrusted", "", true},
		{"trusted proxy", "tenant: {trusted_proxies: [" + heavy + "]}\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := start(t, echo(t), minimal+tc.tenant+
				"body: {buffer_bytes: 0, spool_max_bytes: 1000, spool_max_bytes_per_client: 500}\ntimeouts: {read: 1h}\n")
			m := gw.gw.Metrics()
			held := dialFrom(t, gw.url, heavy)
			io.WriteString(held, postHead(500)+strings.Repeat("x", 400))
			eventually(t, "the held body's 400 bytes spooled", func() bool { return metric(t, m, spoolGauge) == 400 })

			resp, body := postFrom(t, gw.url, heavy, 200)
			if tc.capped {
				spoolFull(t, resp, body, true)
			} else if resp.StatusCode != 200 {
				t.Fatalf("a trusted proxy's second body: %d %q", resp.StatusCode, body)
			}
			if resp, body := postFrom(t, gw.url, "127.0.0.3", 200); resp.StatusCode != 200 {
				t.Fatalf("another client's body beside the one at its share: %d %q", resp.StatusCode, body)
			}
			io.WriteString(held, strings.Repeat("x", 100))
			if resp, body := readAnswer(t, held); resp.StatusCode != 200 {
				t.Fatalf("the held body, sent whole at the share: %d %q", resp.StatusCode, body)
			}
			spoolEmpty(t, gw)
		})
	}
}

// A body whose own bytes in the file pass the client's share (a trusted
// proxy's: the total) can never be received, however long its client
// waits: it is refused 413 body_too_large, with no Retry-After, while one
// at the share is received.
func TestSpoolBodyOverTheShareIsTooLarge(t *testing.T) {
	for _, tc := range []struct {
		name, tenant string
		fits         int // the largest body received
	}{
		{"untrusted", "", 500},
		{"trusted proxy", "tenant: {trusted_proxies: [127.0.0.2]}\n", 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := start(t, echo(t), minimal+tc.tenant+
				"body: {buffer_bytes: 100, spool_max_bytes: 1000, spool_max_bytes_per_client: 500}\n")
			m := gw.gw.Metrics()
			resp, body := postFrom(t, gw.url, "127.0.0.2", 100+tc.fits+1)
			spoolTooLarge(t, resp, body)
			if got := metric(t, m, "rejected_total", "reason", "spool-size"); got != 1 {
				t.Errorf("rejected_total{reason=spool-size} = %v, want 1", got)
			}
			if resp, body := postFrom(t, gw.url, "127.0.0.2", 100+tc.fits); resp.StatusCode != 200 {
				t.Fatalf("a body at the cap: %d %q", resp.StatusCode, body)
			}
			spoolEmpty(t, gw)
		})
	}
}

// Every byte counted in a spool file is given back once its request ends,
// however it ends: answered, failed by the backend, cut short by its
// client mid-body, past timeouts.read or past timeouts.upstream.
func TestSpoolBytesGivenBack(t *testing.T) {
	held := make(chan string, 100) // the paths of the requests the backend holds, as they arrive
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/fail":
			io.Copy(io.Discard, r.Body)
			panic(http.ErrAbortHandler) // the connection is cut: 502
		case strings.HasPrefix(r.URL.Path, "/hold/"):
			// Read first: the server sees the gateway give up on the
			// request (and ends its context) only once its body is read.
			io.Copy(io.Discard, r.Body)
			held <- r.URL.Path
			<-r.Context().Done()
		default:
			io.Copy(io.Discard, r.Body)
		}
	})
	caps := "body: {buffer_bytes: 0, spool_max_bytes: 100000}\n"
	gw := start(t, be.URL, minimal+caps+"timeouts: {read: 1h}\n")
	m := gw.gw.Metrics()
	body := strings.Repeat("x", 2000)
	request := func(path string) string {
		return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\nContent-Length: 2000\r\n\r\n", path)
	}

	t.Run("answered", func(t *testing.T) {
		c := dialRaw(t, gw.url)
		io.WriteString(c, request("/")+body)
		if resp, msg := readAnswer(t, c); resp.StatusCode != 200 {
			t.Fatalf("%d %q", resp.StatusCode, msg)
		}
		spoolEmpty(t, gw)
	})
	t.Run("backend failed", func(t *testing.T) {
		c := dialRaw(t, gw.url)
		io.WriteString(c, request("/fail")+body)
		if resp, msg := readAnswer(t, c); resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("%d %q, want 502", resp.StatusCode, msg)
		}
		spoolEmpty(t, gw)
	})
	t.Run("upstream timeout", func(t *testing.T) {
		// Its own gateway, whose timeouts.upstream ends the request the
		// backend holds. The 100ms run from the request's arrival at the
		// gateway, so a stall of the machine can let them pass before the
		// backend has the request, which it then never gets (or gets
		// after the answer), or, once it has it, before the gauge is read,
		// and the bytes are then rightly given back already. The gateway
		// counts the upstream timeout before it gives them back: read
		// after the gauge, the counter tells a try whose gauge was read
		// while the backend had the request from one read too late. A try
		// is sent again, on a path of its own, in either case: whatever
		// the machine's pace, the try judged is one whose gauge was read
		// while the backend had it.
		gw := start(t, be.URL, minimal+caps+"timeouts: {upstream: 100ms}\n")
		m := gw.gw.Metrics()
		for try := 1; ; try++ {
			if try > 20 {
				t.Fatalf("in %d tries the request's deadline passed each time before the spool gauge was read", try-1)
			}
			path := fmt.Sprintf("/hold/%d", try)
			timeouts := metric(t, m, "io_timeouts_total", "op", "upstream")
			c := dialRaw(t, gw.url)
			c.SetDeadline(time.Now().Add(bound))
			io.WriteString(c, request(path)+body)
			answered := answerOf(c)
			// This try's request at the backend, or its answer first.
			var counted float64
			var late bool
		wait:
			for {
				select {
				case p := <-held:
					if p != path {
						continue // an earlier try's, come after its answer
					}
					counted = metric(t, m, spoolGauge)
					late = metric(t, m, "io_timeouts_total", "op", "upstream") > timeouts
				case a := <-answered:
					late = true // the deadline passed before the backend had it
					answered <- a
				}
				break wait
			}
			if a := <-answered; a.err != nil || a.status != http.StatusGatewayTimeout {
				t.Fatalf("%d %v, want 504", a.status, a.err)
			}
			spoolEmpty(t, gw)
			if !late {
				if counted != 2000 {
					t.Errorf("%v bytes counted while the backend has the request, want 2000", counted)
				}
				return
			}
		}
	})
	t.Run("cut short", func(t *testing.T) {
		c := dialRaw(t, gw.url)
		io.WriteString(c, request("/")+body[:1500])
		eventually(t, "the body's 1500 bytes spooled", func() bool { return metric(t, m, spoolGauge) == 1500 })
		c.Close()
		spoolEmpty(t, gw)
	})
	t.Run("read timeout", func(t *testing.T) {
		// Its own gateway, whose timeouts.read ends the body: how many of
		// its bytes are in by then depends on the machine, but none may
		// stay counted after.
		gw := start(t, be.URL, minimal+caps+"timeouts: {read: 200ms}\n")
		c := dialRaw(t, gw.url)
		io.WriteString(c, request("/")+body[:1500])
		if resp, msg := readAnswer(t, c); resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("%d %q, want 408", resp.StatusCode, msg)
		}
		spoolEmpty(t, gw)
	})
}

// body.spool_max_bytes and spool_max_bytes_per_client change on reload, for
// the requests that arrive after it.
func TestSpoolCapsReload(t *testing.T) {
	gw, write := reloadable(t, echo(t), "backends: [%s]\nbody: {buffer_bytes: 0, spool_max_bytes: 1000}\n")
	reload := func(caps string) {
		t.Helper()
		write("backends: [%s]\nbody: {buffer_bytes: 0, " + caps + "}\n")
		if err := gw.gw.ReloadFile(); err != nil {
			t.Fatal(err)
		}
	}
	// The default share is an eighth of the total: 125 bytes, which a
	// body of 500 can never fit in.
	resp, body := postFrom(t, gw.url, "127.0.0.2", 500)
	spoolTooLarge(t, resp, body)

	reload("spool_max_bytes: 1000, spool_max_bytes_per_client: 1000")
	if resp, body := postFrom(t, gw.url, "127.0.0.2", 500); resp.StatusCode != 200 {
		t.Fatalf("after a reload raising the share: %d %q", resp.StatusCode, body)
	}
	reload("spool_max_bytes: 400, spool_max_bytes_per_client: 400")
	resp, body = postFrom(t, gw.url, "127.0.0.2", 500)
	spoolTooLarge(t, resp, body)
	reload("spool_max_bytes: 400, spool_max_bytes_per_client: 50")
	resp, body = postFrom(t, gw.url, "127.0.0.2", 50)
	if resp.StatusCode != 200 {
		t.Fatalf("a body at the share: %d %q", resp.StatusCode, body)
	}
	reload("spool_max_bytes: 40, spool_max_bytes_per_client: 40")
	resp, body = postFrom(t, gw.url, "127.0.0.2", 50)
	spoolTooLarge(t, resp, body)
	spoolEmpty(t, gw)
}
