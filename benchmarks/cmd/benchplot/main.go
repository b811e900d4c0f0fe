// Command benchplot draws the benchmark charts from the raw benchmark
// outputs, so that they can be regenerated whenever a result changes.
//
// It reads the `go test -bench` outputs in results/ (each may hold several
// runs concatenated, as -count writes them) and writes one SVG chart per
// workload to charts/, taking the median of each benchmark's runs at each
// GOMAXPROCS (the "-N" suffix of its name; none means 1):
//
//   - server.txt, overload.txt, flatwork.txt, groupedwork.txt and
//     submitters.txt: ns/op against GOMAXPROCS, a line per contender (a
//     bar per contender when the file has a single GOMAXPROCS);
//   - isolation.txt: ns/cold-start and p50-ns/cold-start, a bar each per
//     contender.
//
// Each X.txt gives X.svg; a workload whose output is missing is skipped
// with a note. The table [charts] says which benchmark and metric each
// chart shows: a new workload is a line there. The same input always
// gives the same SVG bytes. From the benchmarks module:
//
//	go run ./cmd/benchplot
//	go run ./cmd/benchplot -results results -charts charts
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// nsPerOp is the metric of the workloads whose op is one request, one
// refused call or one task.
var nsPerOp = []metric{{unit: "ns/op"}}

// charts is what benchplot draws: one chart per line.
var charts = []chartSpec{
	{"server.txt", "BenchmarkServer", byProcs, nsPerOp,
		"Server: 16 callers per P, each admits ~0.5 µs of work for one of 1,000 tenants and waits",
		"ns per request (lower is better)"},
	{"overload.txt", "BenchmarkOverload", byProcs, nsPerOp,
		"Overload: every tenant full, every call refused",
		"ns per refused call (lower is better)"},
	{"flatwork.txt", "BenchmarkFlatWork", byProcs, nsPerOp,
		"Flat batch: one submitter, limit 64, ~200 ns of work per task",
		"ns per task (lower is better)"},
	{"groupedwork.txt", "BenchmarkGroupedWork", byProcs, nsPerOp,
		"Grouped batch: 1,000 groups of 4, 256 in flight, ~200 ns of work per task",
		"ns per task (lower is better)"},
	{"submitters.txt", "BenchmarkGroupedSubmitters", byProcs, nsPerOp,
		"Submitters: 8 goroutines submit one grouped batch of tiny tasks",
		"ns per task (lower is better)"},
	{"isolation.txt", "BenchmarkIsolation", bars,
		[]metric{{"ns/cold-start", "mean"}, {"p50-ns/cold-start", "median"}},
		"Isolation: a cold group's task behind a hot group's backlog of 100,000",
		"cold task's start delay, ns (lower is better)"},
}

func main() {
	resultsDir := flag.String("results", "results", "folder of the raw `go test -bench` outputs")
	chartsDir := flag.String("charts", "charts", "folder the SVG charts are written to")
	flag.Parse()
	if err := run(*resultsDir, *chartsDir, charts, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "benchplot:", err)
		os.Exit(1)
	}
}

// run draws every chart of specs whose input is in resultsDir into
// chartsDir, names each chart written on out and each one skipped on
// notes, and returns the errors of the charts it could not draw.
func run(resultsDir, chartsDir string, specs []chartSpec, out, notes io.Writer) error {
	var errs []error
	for _, s := range specs {
		in := filepath.Join(resultsDir, s.file)
		dst := filepath.Join(chartsDir, strings.TrimSuffix(s.file, filepath.Ext(s.file))+".svg")
		err := plotFile(in, dst, s)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			fmt.Fprintf(notes, "benchplot: skipped %s: no %s\n", dst, in)
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", in, err))
		default:
			fmt.Fprintln(out, dst)
		}
	}
	return errors.Join(errs...)
}

// plotFile reads the benchmark output in, draws the chart s from it and
// writes it to dst.
func plotFile(in, dst string, s chartSpec) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	res, err := parse(f)
	f.Close()
	if err != nil {
		return err
	}
	svg, err := s.render(res)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, svg, 0o644)
}
