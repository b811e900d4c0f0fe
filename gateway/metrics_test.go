package gateway_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
)

// Every gateway and executor series is under metrics.namespace, and the
// series the concurrency design names exist and count what they say.
func TestMetricsNamespace(t *testing.T) {
	g, gw := gated(t, minimal+"metrics: {namespace: edge}\nlimits: {max_concurrency_per_group: 1, queue_timeout: 50ms}\n"+
		"body: {max_bytes: 100000, max_decoded_bytes: 50000, max_ratio: 10}\n", "pass")
	c := client(t)
	for range 3 {
		do(t, c, http.MethodGet, gw.url, "pass", nil)
	}
	held := goDo(t, c, gw.url, "a")
	g.await(t, 1)
	if resp, _ := do(t, c, http.MethodGet, gw.url, "a", nil); resp.StatusCode != 429 { // waits past queue_timeout
		t.Errorf("queued request: %d", resp.StatusCode)
	}
	close(g.release)
	<-held
	do(t, c, http.MethodPost, gw.url, "pass", bytes.NewReader(gz(t, make([]byte, 40000))), "Content-Encoding", "gzip")

	mfs, err := gw.gw.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		n := mf.GetName()
		names[n] = true
		if !strings.HasPrefix(n, "edge_") && !strings.HasPrefix(n, "go_") && !strings.HasPrefix(n, "process_") {
			t.Errorf("%s is outside the namespace", n)
		}
	}
	for _, n := range []string{"queue_depth", "queue_dropped_total", "tasks_spawned_total", "tasks_canceled_total",
		"tasks_aborted_total", "io_timeouts_total", "backoff_retries_total", "busy_rejections_total", "rejected_total",
		"gateway_degraded", "gateway_requests_total", "gateway_request_duration_seconds", "gateway_requests_in_flight",
		"gateway_connections", "breaker_state", "config_reloads_total", "group_completed_total"} {
		if !names["edge_"+n] {
			t.Errorf("no edge_%s", n)
		}
	}
	m := gw.gw.Metrics()
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"tasks_spawned_total", []string{"kind", "request"}, 4},
		{"queue_dropped_total", []string{"queue", "tenant"}, 1},
		{"busy_rejections_total", []string{"endpoint", "proxy"}, 1},
		{"rejected_total", []string{"reason", "decoded-ratio"}, 1},
	} {
		if got := gatherValue(t, m, "edge_"+tc.name, tc.labels...); got != tc.want {
			t.Errorf("edge_%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
}
