package main

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func mustParse(t *testing.T, in string) *results {
	t.Helper()
	res, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return res
}

func TestSplitProcs(t *testing.T) {
	for _, c := range []struct {
		in    string
		name  string
		procs int
	}{
		{"BenchmarkServer/do-16", "BenchmarkServer/do", 16},
		{"BenchmarkServer/do-2", "BenchmarkServer/do", 2},
		{"BenchmarkServer/do", "BenchmarkServer/do", 1},
		{"BenchmarkGroupedShares-2", "BenchmarkGroupedShares", 2},
		{"BenchmarkGroupedShares", "BenchmarkGroupedShares", 1},
		{"BenchmarkFlat/ours-ants", "BenchmarkFlat/ours-ants", 1},
		{"BenchmarkFlat/ours-ants-8", "BenchmarkFlat/ours-ants", 8},
		{"BenchmarkFlat/mutex-floor-burn-2", "BenchmarkFlat/mutex-floor-burn", 2},
		{"BenchmarkX/n-+3", "BenchmarkX/n-+3", 1},
		{"BenchmarkX/n-0", "BenchmarkX/n-0", 1},
		{"BenchmarkX/trailing-", "BenchmarkX/trailing-", 1},
	} {
		if got, want := splitProcs(c.in), (key{c.name, c.procs}); got != want {
			t.Errorf("splitProcs(%q) = %+v, want %+v", c.in, got, want)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{7}, 7},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{10, 1000, 11, 12, 9}, 11},
	} {
		in := slices.Clone(c.in)
		if got := median(in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
		if !slices.Equal(in, c.in) {
			t.Errorf("median(%v) reordered its input to %v", c.in, in)
		}
	}
}

// TestParseMedians checks that repeated lines (-count) are reduced to
// their median per benchmark and GOMAXPROCS, the contenders in order of
// first appearance and GOMAXPROCS ascending, whatever order the runs
// came in.
func TestParseMedians(t *testing.T) {
	res := mustParse(t, `goos: linux
BenchmarkServer/do-16   	  123456	       715.2 ns/op	     160 B/op	       1 allocs/op
BenchmarkServer/xsync-16	  123456	       300 ns/op
BenchmarkServer/do-16   	  123456	       700.0 ns/op	     160 B/op	       1 allocs/op
BenchmarkServer/do      	  123456	       500 ns/op
BenchmarkServer/do-16   	  123456	       9000 ns/op	     160 B/op	       1 allocs/op
BenchmarkServer/do-2    	  123456	       600 ns/op
BenchmarkServer/do      	  123456	       520 ns/op
BenchmarkOther/do-2     	  123456	       1 ns/op
PASS
ok  	github.com/groupexec/groupexec/benchmarks	1.0s
`)
	got := res.points("BenchmarkServer", "ns/op")
	want := []point{
		{contender: "do", procs: 1, median: 510, runs: 2},
		{contender: "do", procs: 2, median: 600, runs: 1},
		{contender: "do", procs: 16, median: 715.2, runs: 3},
		{contender: "xsync", procs: 16, median: 300, runs: 1},
	}
	if !slices.Equal(got, want) {
		t.Errorf("points =\n%+v\nwant\n%+v", got, want)
	}
	if got := res.points("BenchmarkServer", "B/op"); len(got) != 1 || got[0] != (point{"do", 16, 160, 3}) {
		t.Errorf("B/op points = %+v, want do at 16: 160 over 3 runs", got)
	}
	if got := res.points("BenchmarkServe", "ns/op"); len(got) != 0 {
		t.Errorf("a benchmark whose name is a prefix of another's got %+v, want none", got)
	}
}

// TestParseCustomMetrics checks units that the benchmarks report with
// b.ReportMetric, on a line that also has the standard ones.
func TestParseCustomMetrics(t *testing.T) {
	res := mustParse(t, `cpu: AMD EPYC
BenchmarkIsolation/ours-2   	      27	  43611319 ns/op	    100000 hot-backlog-at-probe	         2.889 hot-starts-before-cold	     25.8 ns/cold-start	     18.9 p50-ns/cold-start	24846070 B/op	  100404 allocs/op
BenchmarkIsolation/ours-2   	      27	  43611319 ns/op	    100000 hot-backlog-at-probe	         1.5 hot-starts-before-cold	     27.0 ns/cold-start	     17.1 p50-ns/cold-start	24846070 B/op	  100404 allocs/op
BenchmarkIsolation/ours-2   	      27	  43611319 ns/op	    100000 hot-backlog-at-probe	         0 hot-starts-before-cold	     20.0 ns/cold-start	     19.5 p50-ns/cold-start	24846070 B/op	  100404 allocs/op
`)
	for unit, want := range map[string]float64{
		"ns/cold-start":          25.8,
		"p50-ns/cold-start":      18.9,
		"hot-starts-before-cold": 1.5,
		"hot-backlog-at-probe":   100000,
	} {
		got := res.points("BenchmarkIsolation", unit)
		if len(got) != 1 || got[0] != (point{"ours", 2, want, 3}) {
			t.Errorf("%s: points = %+v, want ours at 2: %v over 3 runs", unit, got, want)
		}
	}
}

// TestParseSkips checks that the lines around the results are skipped:
// headers, a name alone (its results follow its log output), test
// output, and names that are not benchmarks.
func TestParseSkips(t *testing.T) {
	res := mustParse(t, `goos: linux
goarch: amd64
pkg: github.com/groupexec/groupexec/benchmarks
cpu: AMD EPYC
BenchmarkServer/do-2
    server_test.go:42: some log output
BenchmarkServer/do-2   	  100	 5 ns/op
Benchmarking is fun 3 ns/op
Benchmarkfoo-2 100 3 ns/op
light.test BenchmarkServer/do-2 100 3 ns/op
--- FAIL: BenchmarkServer/xsync
cpu: AMD EPYC
cpu: Other CPU
PASS
ok  	github.com/groupexec/groupexec/benchmarks	1.0s
`)
	if len(res.order) != 1 || res.order[0] != (key{"BenchmarkServer/do", 2}) {
		t.Errorf("benchmarks = %+v, want only BenchmarkServer/do at 2", res.order)
	}
	if want := []string{"AMD EPYC", "Other CPU"}; !slices.Equal(res.cpus, want) {
		t.Errorf("cpus = %q, want %q", res.cpus, want)
	}
}

func TestParseErrors(t *testing.T) {
	for _, in := range []string{
		"goos: linux\nBenchmarkServer/do-2 100 12.5\n",
		"BenchmarkServer/do-2 100 12.5 ns/op 7\n",
		"BenchmarkServer/do-2 100 fast ns/op\n",
	} {
		_, err := parse(strings.NewReader(in))
		if err == nil {
			t.Errorf("parse(%q) = nil error, want one", in)
		} else if !strings.Contains(err.Error(), "line ") {
			t.Errorf("parse(%q) = %v, want the line number", in, err)
		}
	}
}

// TestParseRealOutput parses an excerpt of a real run: headers, custom
// metrics, GOMAXPROCS 2 and (no suffix) 1 for one sub-benchmark whose name
// has a dash.
func TestParseRealOutput(t *testing.T) {
	f, err := os.Open("testdata/real.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := parse(f)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"AMD EPYC"}; !slices.Equal(res.cpus, want) {
		t.Errorf("cpus = %q, want %q", res.cpus, want)
	}
	checks := []struct {
		bench, unit string
		want        []point
	}{
		{"BenchmarkIsolation", "ns/cold-start", []point{{"ours", 2, 13200, 3}}},
		{"BenchmarkIsolation", "p50-ns/cold-start", []point{{"ours", 2, 12769, 3}}},
		{"BenchmarkFlat", "ns/op", []point{{"ours-ants", 1, 478.65, 2}, {"ours-ants", 2, 452.15, 2}}},
		{"BenchmarkFlat", "spawns/task", []point{{"ours-ants", 1, 0.000128, 2}, {"ours-ants", 2, 0.00002415, 2}}},
	}
	for _, c := range checks {
		got := res.points(c.bench, c.unit)
		if len(got) != len(c.want) {
			t.Errorf("%s %s: points = %+v, want %+v", c.bench, c.unit, got, c.want)
			continue
		}
		for i := range got {
			g, w := got[i], c.want[i]
			if g.contender != w.contender || g.procs != w.procs || g.runs != w.runs || !near(g.median, w.median) {
				t.Errorf("%s %s: points = %+v, want %+v", c.bench, c.unit, got, c.want)
				break
			}
		}
	}
}

func near(a, b float64) bool { return a == b || (a-b)/b < 1e-9 && (b-a)/b < 1e-9 }
