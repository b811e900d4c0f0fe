package gateway_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// A backend's answer, its informational ones included, has headers of at
// most max_header_bytes, as a request has: net/http's transport took 10 MiB
// by default, and kept them for as long as a slow client took the answer,
// so that memory was no longer bounded by the requests in the gateway
// times its buffers (docs/gateway.md). An answer over it is the backend's
// failure, 502, as nginx answers "upstream sent too big header"; one under
// it passes.
func TestBackendHeadersCapped(t *testing.T) {
	big := strings.Repeat("b", 8<<10)
	var informational atomic.Bool
	b := backend(t, func(w http.ResponseWriter, r *http.Request) {
		n := 1 // a header of 8 KiB, under the cap
		if r.URL.Path == "/big" {
			n = 16 // 128 KiB, over it
		}
		h := w.Header()
		for i := range n {
			h.Set("X-Big-"+string(rune('a'+i)), big)
		}
		if informational.Load() {
			w.WriteHeader(http.StatusEarlyHints)
			clear(h)
		}
		w.Write([]byte("hello"))
	})
	gw := start(t, b.URL, minimal+"max_header_bytes: 65536\n")
	c := client(t)
	for _, early := range []bool{false, true} {
		informational.Store(early)
		if resp, body := do(t, c, http.MethodGet, gw.url+"/small", "a", nil); resp.StatusCode != 200 || body != "hello" {
			t.Errorf("early hints %v: 8 KiB of headers: %d %q, want 200 hello", early, resp.StatusCode, body)
		}
		resp, body := do(t, c, http.MethodGet, gw.url+"/big", "a", nil)
		if resp.StatusCode != http.StatusBadGateway {
			t.Errorf("early hints %v: 128 KiB of headers: %d, %d bytes of them passed on, want 502 backend_error",
				early, resp.StatusCode, len(resp.Header.Get("X-Big-a")))
		} else if code, _, _ := refusal(t, body); code != "backend_error" {
			t.Errorf("early hints %v: 128 KiB of headers: 502 %q, want backend_error", early, body)
		}
	}
}
