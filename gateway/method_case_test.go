package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// A method that is HEAD in another case ("head", "Head") is no HEAD to
// net/http's transport, which reads the body its answer's Content-Length
// announces; but a backend that upper-cases the method (gunicorn with
// casefold_http_method, Symfony's Response::prepare behind Apache) answers
// it as a HEAD, its length without the body. The gateway waited for the
// body to the request's deadline, holding the slot, and counted the 504
// against the backend's breaker, which any client could so open for every
// tenant. Such a request is refused 501 method_not_supported, as an
// override to HEAD is, and never reaches a backend; another method in
// another case ("Get") is proxied as sent, its answer framed as any.
func TestHeadInAnotherCaseRefused(t *testing.T) {
	var mu sync.Mutex
	var got []string
	b := backend(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method)
		mu.Unlock()
		if strings.EqualFold(r.Method, http.MethodHead) {
			// As an upper-casing backend answers it: the length, and the
			// connection kept, without the body.
			conn, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			brw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")
			brw.Flush()
			io.Copy(io.Discard, brw)
			return
		}
		io.WriteString(w, "hello")
	})
	gw := start(t, b.URL, minimal+"timeouts: {upstream: 1h}\nbreaker: {consecutive_failures: 1, timeout: 1h}\n")
	c := client(t)
	for _, m := range []string{"head", "Head", "hEAD"} {
		resp, body := do(t, c, m, gw.url+"/x", "acme", nil)
		if resp.StatusCode != http.StatusNotImplemented {
			t.Errorf("%s: %d %q, want 501 method_not_supported", m, resp.StatusCode, body)
		} else if code, _, _ := refusal(t, body); code != "method_not_supported" {
			t.Errorf("%s: 501 %q, want method_not_supported", m, body)
		}
	}
	mu.Lock()
	if len(got) != 0 {
		t.Errorf("the backend got %q", got)
	}
	mu.Unlock()
	for _, m := range []string{"Get", "HEAD"} {
		want := "hello"
		if m == http.MethodHead {
			want = ""
		}
		if resp, body := do(t, c, m, gw.url+"/x", "acme", nil); resp.StatusCode != http.StatusOK || body != want {
			t.Errorf("%s: %d %q, want 200 %q", m, resp.StatusCode, body, want)
		}
	}
}
