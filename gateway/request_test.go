package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// A backend's 100 Continue is not the request's status: with Expect:
// 100-continue, the backend's 500s still reach the breaker and the metrics.
func TestExpectContinueKeepsTheFinalStatus(t *testing.T) {
	var hits atomic.Int32
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.Copy(io.Discard, r.Body) // sends the 100 Continue
		http.Error(w, "boom", 500)
	})
	gw := start(t, be.URL, minimal+"breaker: {consecutive_failures: 5, timeout: 1h}\n")
	c := client(t)
	var codes []int
	for range 7 {
		resp, _ := do(t, c, http.MethodPost, gw.url, "a", strings.NewReader("payload"), "Expect", "100-continue")
		codes = append(codes, resp.StatusCode)
	}
	want := []int{500, 500, 500, 500, 500, 503, 503}
	for i := range want {
		if codes[i] != want[i] {
			t.Fatalf("statuses %v, want %v", codes, want)
		}
	}
	if hits.Load() != 5 {
		t.Errorf("backend hit %d times, want 5", hits.Load())
	}
	m := gw.gw.Metrics()
	if got := metric(t, m, requestsTotal, "code", "100"); got != 0 {
		t.Errorf("%v requests counted with code 100", got)
	}
	if got := metric(t, m, requestsTotal, "code", "500"); got != 5 {
		t.Errorf("%v requests counted with code 500, want 5", got)
	}
}
