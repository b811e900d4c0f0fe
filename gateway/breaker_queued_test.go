package gateway_test

import (
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/gateway"
)

// A request that waited in its tenant's queue when the breaker it needs
// opened is refused as it would start, never proxied, and answered as one
// refused by the open breaker on arrival: 503 breaker_open, the breaker's
// time left as Retry-After, the same body, and not counted in
// rejected_total (a refusal for what the client sent) either. With
// breaker.per: tenant the executor refuses it as it would start, counted
// once under limit="circuit_breaker", as on arrival; with the backends'
// breakers (the default) the proxy asks them as each try is sent, after
// the wait, and the executor counts neither refusal.
func TestBreakerRefusesAQueuedRequestAsOnArrival(t *testing.T) {
	for _, tc := range []struct {
		name            string
		per             string     // breaker.per, and its other settings
		breakerRefusals [2]float64 // group_rejected_total{limit=circuit_breaker} after the queued refusal, after the one on arrival
	}{
		{"tenant", "tenant", [2]float64{1, 2}},
		{"backend", "backend, max_timeout: 1h", [2]float64{0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) { testBreakerRefusesAQueuedRequest(t, tc.per, tc.breakerRefusals) })
	}
}

func testBreakerRefusesAQueuedRequest(t *testing.T, per string, want [2]float64) {
	entered, release := make(chan struct{}), make(chan struct{})
	var others atomic.Int32
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/fail" {
			others.Add(1)
			return
		}
		close(entered)
		select {
		case <-release:
		case <-r.Context().Done():
		}
		http.Error(w, "boom", http.StatusInternalServerError)
	})
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	gw := start(t, be.URL, minimal+"limits: {max_concurrency_per_group: 1}\nbreaker: {per: "+per+", consecutive_failures: 1, timeout: 1h}\n",
		gateway.WithClock(clk))
	m := gw.gw.Metrics()
	c := client(t)

	first := goDo(t, c, gw.url+"/fail", "bad")
	<-entered
	type answer struct {
		code       int
		retryAfter string
		body       string
	}
	queued := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, gw.url+"/queued", nil)
		req.Header.Set("X-Tenant", "bad")
		resp, err := c.Do(req)
		if err != nil {
			t.Errorf("queued request: %v", err)
			queued <- answer{}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		queued <- answer{resp.StatusCode, resp.Header.Get("Retry-After"), string(b)}
	}()
	deadline := time.Now().Add(bound)
	for metric(t, m, "queue_depth", "queue", "global") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the second request never queued")
		}
		time.Sleep(time.Millisecond)
	}
	rejectedBefore := sumOf(t, m, "rejected_total")

	close(release)
	if code := <-first; code != http.StatusInternalServerError {
		t.Fatalf("first request: %d, want the backend's 500", code)
	}
	var late answer
	select {
	case late = <-queued:
	case <-time.After(bound):
		t.Fatalf("the queued request got no answer within %v", bound)
	}
	breakerRefusals := sumOf(t, m, "group_rejected_total")
	byTheBreaker := metric(t, m, "group_rejected_total", "limit", "circuit_breaker")
	rejectedLate := sumOf(t, m, "rejected_total")
	resp, body := do(t, c, http.MethodGet, gw.url+"/arrival", "bad", nil)
	onArrival := answer{resp.StatusCode, resp.Header.Get("Retry-After"), body}
	if code, _, tenant := refusal(t, onArrival.body); onArrival.code != http.StatusServiceUnavailable || code != "breaker_open" ||
		tenant != "bad" || onArrival.retryAfter != "3600" {
		t.Fatalf("refused on arrival: %+v, want 503 breaker_open for bad, Retry-After 3600 (the breaker's time left)", onArrival)
	}
	if late != onArrival {
		t.Errorf("queued then refused: %+v; refused on arrival: %+v, want the same answer", late, onArrival)
	}
	if n := others.Load(); n != 0 {
		t.Errorf("the backend got %d refused requests", n)
	}
	if breakerRefusals != want[0] || byTheBreaker != want[0] {
		t.Errorf("after the queued refusal: group_rejected_total %v, %v of it by the circuit_breaker; want %v, by the circuit_breaker",
			breakerRefusals, byTheBreaker, want[0])
	}
	if n := metric(t, m, "group_rejected_total", "limit", "circuit_breaker"); n != want[1] || sumOf(t, m, "group_rejected_total") != want[1] {
		t.Errorf("after the refusal on arrival: group_rejected_total{limit=circuit_breaker} %v, want %v", n, want[1])
	}
	if after := sumOf(t, m, "rejected_total"); rejectedLate != rejectedBefore || after != rejectedBefore {
		t.Errorf("rejected_total: %v before, %v after the queued refusal, %v after the one on arrival; want neither counted there",
			rejectedBefore, rejectedLate, after)
	}
	if d := metric(t, m, "queue_depth", "queue", "global"); d != 0 {
		t.Errorf("queue_depth %v, want 0", d)
	}
}
