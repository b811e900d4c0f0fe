package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// svgText returns how a string is written as the whole of a text element.
func svgText(s string) string { return ">" + s + "</text>" }

// TestRun draws every chart of the table from the inputs in
// testdata/results and checks each one's series and shape.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	var out, notes bytes.Buffer
	if err := run("testdata/results", dir, charts, &out, &notes); err != nil {
		t.Fatalf("run: %v", err)
	}
	if notes.Len() != 0 {
		t.Errorf("notes = %q, want none: every input is there", notes.String())
	}
	for _, c := range []struct {
		file   string
		series []string
		has    []string // other text the chart must have
		hasNot []string
	}{
		{"server.svg", []string{"do", "submit-wait", "xsync", "pond-subpools"},
			[]string{svgText("GOMAXPROCS"), svgText("1"), svgText("2"), svgText("8"), svgText("16"), svgText("ns per request (lower is better)")},
			[]string{"log scale"}},
		{"overload.svg", []string{"go", "submit", "do", "bulkhead", "xsync", "failsafe-bulkhead", "pond-trysubmit"},
			[]string{svgText("GOMAXPROCS"), svgText("16"), "ns per refused call (lower is better), log scale"},
			[]string{svgText("8")}},
		{"flatwork.svg", []string{"ours", "ours-go", "pond", "fixed"},
			[]string{"median of 3 runs, cpu: Test CPU @ 2.00GHz, GOMAXPROCS 2", svgText("ns per task (lower is better)")},
			[]string{svgText("GOMAXPROCS")}},
		{"groupedwork.svg", []string{"ours", "ours-go", "pond", "xsync-group-first"},
			[]string{svgText("GOMAXPROCS")}, nil},
		{"submitters.svg", []string{"ours", "ours-go", "xsync-group-first"},
			[]string{svgText("GOMAXPROCS")}, nil},
		{"isolation.svg", []string{"ours", "xsync-group-first", "xsync-global-first"},
			[]string{svgText("mean (ns/cold-start)"), svgText("median (p50-ns/cold-start)"), "log scale", "GOMAXPROCS 2"},
			nil},
	} {
		path := filepath.Join(dir, c.file)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v", c.file, err)
			continue
		}
		svg := string(b)
		if !strings.HasPrefix(svg, "<?xml") || !strings.Contains(svg, "<svg") {
			t.Errorf("%s is not an SVG: %.60q", c.file, svg)
		}
		for _, s := range c.series {
			if !strings.Contains(svg, svgText(s)) {
				t.Errorf("%s has no series %q", c.file, s)
			}
		}
		for _, s := range c.has {
			if !strings.Contains(svg, s) {
				t.Errorf("%s has no %q", c.file, s)
			}
		}
		for _, s := range c.hasNot {
			if strings.Contains(svg, s) {
				t.Errorf("%s has %q", c.file, s)
			}
		}
		if !strings.Contains(out.String(), path+"\n") {
			t.Errorf("out = %q, does not name %s", out.String(), path)
		}
	}
}

// textY returns the y attribute of the first text element of svg that
// is s, or NaN. The texts are drawn flipped (scale(1, -1)): the smaller y,
// the higher on the page.
func textY(svg, s string) float64 {
	i := strings.Index(svg, svgText(s))
	if i < 0 {
		return math.NaN()
	}
	m := textYRE.FindAllStringSubmatch(svg[:i], -1)
	if len(m) == 0 {
		return math.NaN()
	}
	y, err := strconv.ParseFloat(m[len(m)-1][1], 64)
	if err != nil {
		return math.NaN()
	}
	return y
}

var textYRE = regexp.MustCompile(`<text x="[^"]*" y="([^"]*)"`)

// TestBarsTopDown checks that a bar chart lists the contenders from the
// top in the order of the input.
func TestBarsTopDown(t *testing.T) {
	dir := t.TempDir()
	if err := run("testdata/results", dir, charts, new(bytes.Buffer), new(bytes.Buffer)); err != nil {
		t.Fatalf("run: %v", err)
	}
	for file, order := range map[string][]string{
		"isolation.svg": {"ours", "xsync-group-first", "xsync-global-first"},
		"flatwork.svg":  {"ours", "ours-go", "pond", "fixed"},
	} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(order); i++ {
			above, below := textY(string(b), order[i-1]), textY(string(b), order[i])
			if !(above < below) {
				t.Errorf("%s: %s (y %v) is not above %s (y %v)", file, order[i-1], above, order[i], below)
			}
		}
	}
}

// TestRunDeterministic checks that the same inputs give the same bytes.
func TestRunDeterministic(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, dir := range []string{a, b} {
		if err := run("testdata/results", dir, charts, new(bytes.Buffer), new(bytes.Buffer)); err != nil {
			t.Fatalf("run: %v", err)
		}
	}
	for _, s := range charts {
		name := strings.TrimSuffix(s.file, ".txt") + ".svg"
		x, errA := os.ReadFile(filepath.Join(a, name))
		y, errB := os.ReadFile(filepath.Join(b, name))
		if errA != nil || errB != nil {
			t.Fatalf("%s: %v, %v", name, errA, errB)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two runs on the same input", name)
		}
	}
}

// TestRunMissingInputs checks that a chart whose input is missing is
// skipped with a note, and that the others are still drawn.
func TestRunMissingInputs(t *testing.T) {
	results, dir := t.TempDir(), filepath.Join(t.TempDir(), "charts")
	in, err := os.ReadFile("testdata/results/server.txt")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(results, "server.txt"), in, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, notes bytes.Buffer
	if err := run(results, dir, charts, &out, &notes); err != nil {
		t.Fatalf("run: %v", err)
	}
	if want := filepath.Join(dir, "server.svg") + "\n"; out.String() != want {
		t.Errorf("out = %q, want %q", out.String(), want)
	}
	for _, s := range charts[1:] {
		if !strings.Contains(notes.String(), "no "+filepath.Join(results, s.file)+"\n") {
			t.Errorf("notes = %q, say nothing of %s", notes.String(), s.file)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "server.svg" {
		t.Errorf("charts folder holds %v, want server.svg only", entries)
	}
}

// TestRunNoResults checks that an input without the chart's benchmark is
// an error that names both, and does not stop the other charts.
func TestRunNoResults(t *testing.T) {
	results, dir := t.TempDir(), t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(results, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("server.txt", "BenchmarkFlat/ours-2 100 5 ns/op\n")
	write("isolation.txt", "BenchmarkIsolation/ours-2 10 5 ns/op 7 ns/cold-start\n")
	write("overload.txt", "BenchmarkOverload/go-2 100 5 ns/op\nBenchmarkOverload/go-4 100 6 ns/op\n")
	err := run(results, dir, charts, new(bytes.Buffer), new(bytes.Buffer))
	if err == nil {
		t.Fatal("run = nil error, want the charts without results")
	}
	for _, want := range []string{"server.txt: no BenchmarkServer/... result reports ns/op", "isolation.txt: no BenchmarkIsolation/... result reports p50-ns/cold-start"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("run = %v, want it to say %q", err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "overload.svg")); err != nil {
		t.Errorf("overload chart: %v", err)
	}
}

// TestRunNewWorkload draws a workload from a table line of its own.
func TestRunNewWorkload(t *testing.T) {
	results, dir := t.TempDir(), t.TempDir()
	in := `BenchmarkWaitingMemory/ours-2 	1 	100 ns/op	 262.0 bytes/waiting-task	100000 waiting-tasks
BenchmarkWaitingMemory/goroutine-semaphore-2 	1 	100 ns/op	 2870 bytes/waiting-task	100000 waiting-tasks
`
	if err := os.WriteFile(filepath.Join(results, "memory.txt"), []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	specs := []chartSpec{{"memory.txt", "BenchmarkWaitingMemory", bars, []metric{{unit: "bytes/waiting-task"}}, "Waiting memory", "bytes per waiting task"}}
	if err := run(results, dir, specs, new(bytes.Buffer), new(bytes.Buffer)); err != nil {
		t.Fatalf("run: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "memory.svg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{svgText("ours"), svgText("goroutine-semaphore"), svgText("262"), svgText("2,870"), ">bytes per waiting task"} {
		if !strings.Contains(string(b), s) {
			t.Errorf("memory.svg has no %q", s)
		}
	}
}
