package gateway_test

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/gateway"
)

// latencies returns the count and the sum, in seconds, of every tenant's
// gateway_request_duration_seconds.
func latencies(t *testing.T, g prometheus.Gatherer) (count uint64, sum float64) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != ns+"gateway_request_duration_seconds" {
			continue
		}
		for _, m := range mf.Metric {
			count += m.GetHistogram().GetSampleCount()
			sum += m.GetHistogram().GetSampleSum()
		}
	}
	return count, sum
}

// An upgraded connection is in the latency histogram for the time to its
// 101, as in the mean behind Retry-After: the backend's work is its answer.
// Counted whole, an hour of a WebSocket went into the histogram that
// requests taking milliseconds are measured by, and a few of them moved
// its p99 to the connections' lifetimes.
func TestUpgradeLatencyIsTheTimeToTheSwitch(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	const toSwitch = 2 * time.Second
	url, _ := hijacker(t, func(conn net.Conn, brw *bufio.ReadWriter) {
		clk.Advance(toSwitch) // the backend takes that long to switch
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
		brw.Flush()
		go func() {
			defer conn.Close()
			io.Copy(conn, brw)
		}()
	})
	gw := start(t, url, minimal, gateway.WithClock(clk))
	c, _ := upgrade(t, gw.url, "a")
	clk.Advance(time.Hour) // the connection lasts an hour once switched
	c.Close()
	eventually(t, "the upgraded request to be counted", func() bool {
		count, _ := latencies(t, gw.gw.Metrics())
		return count == 1
	})
	if _, sum := latencies(t, gw.gw.Metrics()); sum != toSwitch.Seconds() {
		t.Errorf("the latency histogram has a request taking %vs, want %vs (the time to the 101)", sum, toSwitch.Seconds())
	}
}
