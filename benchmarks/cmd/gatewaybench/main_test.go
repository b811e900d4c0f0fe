package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/groupexec/groupexec/benchmarks/loadgen"
)

// TestMain fails the run if a server, proxy, gateway or client goroutine
// outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A whole bench at tiny durations: every part runs, reports its result
// lines and writes a chart; the isolation run shows the heavy tenant
// refused. The numbers themselves are not checked: at these durations, on a
// shared CI machine, they are noise.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and sends load for a few seconds")
	}
	svg := filepath.Join(t.TempDir(), "chart.svg")
	var out bytes.Buffer
	p := params{
		repeats: 1, tputRepeats: 1, delay: time.Millisecond, rate: 200, latencyRun: 200 * time.Millisecond,
		clients: 4, throughputRn: 200 * time.Millisecond,
		slots: 2, service: 10 * time.Millisecond, heavyX: 5, lightRate: 20,
		isoRun: 600 * time.Millisecond, baseRun: 300 * time.Millisecond, timeout: 300 * time.Millisecond,
		bucket: 200 * time.Millisecond, svg: svg, parts: "oti", chartTitle: "smoke <&>",
	}
	if err := run(context.Background(), &out, p); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{"RESULT latency:", "RESULT throughput:", "RESULT isolation:", "RESULT contrast without the gateway:", "| gateway, heavy 5x + light |"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if !strings.Contains(s, "heavy 429s") || strings.Contains(s, "heavy 429s 0 (goal > 0: NOT met)") {
		t.Errorf("the gateway refused none of the heavy tenant's 5x load:\n%s", s)
	}
	data, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	checkSVG(t, data, 8) // 2 panels x 2 tenants x p50,p99
}

// checkSVG parses data as XML and counts its polylines.
func checkSVG(t *testing.T, data []byte, minLines int) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(data))
	lines, root := 0, ""
	for {
		tok, err := d.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("SVG does not parse: %v", err)
			}
			break
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Local
			}
			if se.Name.Local == "polyline" {
				lines++
			}
		}
	}
	if root != "svg" || lines < minLines {
		t.Errorf("root %q with %d polylines, want svg with at least %d", root, lines, minLines)
	}
}

// The chart draws each series through its non-empty buckets, breaking the
// line at an empty one, and escapes its text.
func TestChart(t *testing.T) {
	bs := func(p99 ...time.Duration) []loadgen.Bucket {
		out := make([]loadgen.Bucket, len(p99))
		for i, v := range p99 {
			out[i].Start = time.Duration(i) * time.Second
			if v > 0 {
				out[i].N, out[i].P50, out[i].P99 = 1, v/2, v
			}
		}
		return out
	}
	c := chart{Title: "a <b> & c", Bucket: time.Second, Duration: 4 * time.Second, Panels: []panel{
		{Name: "one", Heavy: bs(time.Millisecond, 0, 2*time.Millisecond, 3*time.Millisecond), Light: bs(20*time.Millisecond, 20*time.Millisecond, 20*time.Millisecond, 20*time.Millisecond), Guide: 40 * time.Millisecond},
	}}
	var buf bytes.Buffer
	if err := c.write(&buf); err != nil {
		t.Fatal(err)
	}
	// heavy: broken in two, for p50 and p99 (4); light: one each (2).
	checkSVG(t, buf.Bytes(), 6)
	if n := strings.Count(buf.String(), "<polyline"); n != 6 {
		t.Errorf("%d polylines, want 6", n)
	}
	if !strings.Contains(buf.String(), "a &lt;b&gt; &amp; c") {
		t.Error("title not escaped")
	}
	if lo, hi := c.yRange(); lo != 0.1 || hi != 100 {
		t.Errorf("y range %v..%v ms, want 0.1..100 (heavy p50 0.5ms, guide 40ms)", lo, hi)
	}
	for _, want := range []string{">0.1ms<", ">1ms<", ">10ms<", ">100ms<"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("no y label %s", want)
		}
	}
}
