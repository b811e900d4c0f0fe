package gateway_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/gateway"
)

// Each tenant has its own token bucket: the default rate_limit, or its own;
// a request over it gets 429 with a Retry-After of the bucket's delay.
func TestRateLimits(t *testing.T) {
	be := backend(t, func(http.ResponseWriter, *http.Request) {})
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	gw := start(t, be.URL, minimal+"rate_limit: {rps: 2, burst: 2}\ntenants: {vip: {rate_limit: {rps: 10, burst: 5}}, slow: {rate_limit: {rps: 0.1}}}\n",
		gateway.WithClock(clk))
	c := client(t)
	send := func(tenant string) (int, string) {
		resp, _ := do(t, c, http.MethodGet, gw.url, tenant, nil)
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	expect := func(tenant string, ok int, retryAfter string) {
		t.Helper()
		for i := range ok {
			if code, _ := send(tenant); code != 200 {
				t.Fatalf("%s request %d within its burst: %d", tenant, i+1, code)
			}
		}
		if code, ra := send(tenant); code != 429 || ra != retryAfter {
			t.Fatalf("%s past its burst: %d Retry-After %q, want 429 and %s", tenant, code, ra, retryAfter)
		}
	}
	expect("a", 2, "1")     // 2 rps: the next token in 500ms, rounded up
	expect("b", 2, "1")     // its own bucket
	expect("vip", 5, "1")   // 10 rps, burst 5
	expect("slow", 1, "10") // 0.1 rps: 10s
	expect("", 2, "1")      // the default tenant, like any other
	clk.Advance(500 * time.Millisecond)
	expect("a", 1, "1")
	if got := metric(t, gw.gw.Metrics(), "rejected_total", "reason", "rate-limited"); got != 6 {
		t.Errorf("rejected_total{reason=rate-limited} = %v, want 6", got)
	}
	for i := range 50 { // unconfigured tenants each get a bucket
		if code, _ := send(fmt.Sprintf("t%d", i)); code != 200 {
			t.Fatalf("tenant t%d: %d", i, code)
		}
	}
}

// A refusal for lack of room says when to come back from the queue that
// refused it: the requests ahead, drained at the group's concurrency, one
// mean service time (here 10s, on the gateway's clock) per round.
func TestRetryAfterFromQueue(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	g := newGate()
	gw := start(t, backend(t, g.ServeHTTP).URL, minimal+"limits: {max_concurrency_per_group: 1, max_in_flight_per_group: 4}\n",
		gateway.WithClock(clk))
	c := client(t)
	first := goDo(t, c, gw.url, "a")
	g.await(t, 1)
	clk.Advance(10 * time.Second)
	g.release <- struct{}{}
	<-first
	var held []<-chan int
	for range 4 {
		held = append(held, goDo(t, c, gw.url, "a"))
	}
	g.await(t, 1)
	eventually(t, "three to wait", func() bool {
		s, _ := gw.gw.Executor().GroupStats("a")
		return s.Waiting == 3
	})
	resp, _ := do(t, c, http.MethodGet, gw.url, "a", nil)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "50" {
		t.Errorf("%d Retry-After %q, want 429 and 50 (4 ahead + this one, 1 at a time, 10s each)", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	close(g.release)
	for _, h := range held {
		<-h
	}
}

// A rate so low that its next token is further out than a Duration holds
// gives a Retry-After that far out, never one rounded past the largest
// Duration into "1".
func TestRetryAfterOfATinyRate(t *testing.T) {
	be := backend(t, func(http.ResponseWriter, *http.Request) {})
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	gw := start(t, be.URL, minimal+"rate_limit: {rps: 1e-11}\n", gateway.WithClock(clk))
	c := client(t)
	if resp, _ := do(t, c, http.MethodGet, gw.url, "a", nil); resp.StatusCode != 200 {
		t.Fatalf("the burst's request: %d", resp.StatusCode)
	}
	resp, _ := do(t, c, http.MethodGet, gw.url, "a", nil)
	if ra := resp.Header.Get("Retry-After"); resp.StatusCode != 429 || ra != "9223372037" {
		t.Fatalf("past the burst: %d Retry-After %q, want 429 and 9223372037 (the largest Duration, rounded up)", resp.StatusCode, ra)
	}
}

// An upgraded connection's time, which may be hours of a WebSocket, does
// not feed the mean service time behind a queue's Retry-After: only the
// time to its 101 does. Counted whole, one upgrade held open for an hour
// made every refusal's Retry-After the one-minute cap, for requests that
// take 10s here.
func TestRetryAfterLeavesUpgradesOut(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	g := newGate()
	be := backend(t, switchOnUpgrade(g.ServeHTTP))
	gw := start(t, be.URL, minimal+"limits: {max_concurrency_per_group: 1, max_in_flight_per_group: 1}\n",
		gateway.WithClock(clk))
	c := client(t)
	first := goDo(t, c, gw.url, "a")
	g.await(t, 1)
	clk.Advance(10 * time.Second)
	g.release <- struct{}{}
	<-first

	conn, _ := upgrade(t, gw.url, "a")
	clk.Advance(time.Hour)
	conn.Close()
	eventually(t, "the upgraded request to leave the gateway", func() bool {
		return metric(t, gw.gw.Metrics(), inGatewayGauge) == 0
	})

	held := goDo(t, c, gw.url, "a")
	g.await(t, 1)
	resp, _ := do(t, c, http.MethodGet, gw.url, "a", nil)
	if ra, _ := strconv.Atoi(resp.Header.Get("Retry-After")); resp.StatusCode != 429 || ra < 1 || ra > 20 {
		t.Errorf("%d Retry-After %q, want 429 and at most 20 (1 ahead + this one, 1 at a time, 10s each at most)",
			resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	close(g.release)
	<-held
}
