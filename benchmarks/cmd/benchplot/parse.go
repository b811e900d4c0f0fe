package main

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// results holds every benchmark line of one or more concatenated
// `go test -bench` outputs, grouped by benchmark name and GOMAXPROCS.
type results struct {
	order  []key                        // in order of first appearance
	values map[key]map[string][]float64 // every value of each unit, in input order
	cpus   []string                     // the distinct "cpu:" headers, in order
}

// key names one benchmark at one GOMAXPROCS.
type key struct {
	name  string // full name without the GOMAXPROCS suffix: "BenchmarkServer/do"
	procs int
}

// point is the median of one metric of one sub-benchmark at one GOMAXPROCS.
type point struct {
	contender string // the name below the benchmark: "do" in "BenchmarkServer/do"
	procs     int
	median    float64
	runs      int // how many lines the median is taken over
}

// parse reads `go test -bench` output. Lines other than benchmark results
// (headers, PASS, ok, log output) are skipped, except "cpu:" headers,
// which are kept. A benchmark line must carry an iteration count and then
// value–unit pairs; one that starts so but does not parse is an error.
func parse(r io.Reader) (*results, error) {
	res := &results{values: make(map[key]map[string][]float64)}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if cpu, ok := strings.CutPrefix(line, "cpu:"); ok {
			if cpu = strings.TrimSpace(cpu); !slices.Contains(res.cpus, cpu) {
				res.cpus = append(res.cpus, cpu)
			}
			continue
		}
		f := strings.Fields(line)
		// A name alone on its line is a benchmark whose results follow its
		// log output; "BenchmarkX" with a lower-case letter after
		// "Benchmark" is not a benchmark, as in the testing package.
		if len(f) < 2 || !isBenchmarkName(f[0]) {
			continue
		}
		if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
			continue
		}
		if len(f)%2 != 0 {
			return nil, fmt.Errorf("line %d: a value without a unit: %q", n, line)
		}
		k := splitProcs(f[0])
		m := res.values[k]
		if m == nil {
			m = make(map[string][]float64)
			res.values[k] = m
			res.order = append(res.order, k)
		}
		for i := 2; i < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: value %q: %v", n, f[i], err)
			}
			m[f[i+1]] = append(m[f[i+1]], v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return res, nil
}

func isBenchmarkName(s string) bool {
	rest, ok := strings.CutPrefix(s, "Benchmark")
	return ok && (rest == "" || !('a' <= rest[0] && rest[0] <= 'z'))
}

// splitProcs splits the "-N" suffix that the testing package appends when
// GOMAXPROCS is N > 1; a name without one ran at GOMAXPROCS 1.
func splitProcs(name string) key {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return key{name, 1}
	}
	n, err := strconv.Atoi(name[i+1:])
	if err != nil || n < 1 || name[i+1] == '+' {
		return key{name, 1}
	}
	return key{name[:i], n}
}

// points returns the median of unit for each sub-benchmark of the
// benchmark function bench ("BenchmarkServer") at each GOMAXPROCS, in
// order of the contenders' first appearance and then of GOMAXPROCS.
func (r *results) points(bench, unit string) []point {
	prefix := bench + "/"
	var contenders []string
	byContender := make(map[string][]point)
	for _, k := range r.order {
		c, ok := strings.CutPrefix(k.name, prefix)
		vs := r.values[k][unit]
		if !ok || len(vs) == 0 {
			continue
		}
		if _, seen := byContender[c]; !seen {
			contenders = append(contenders, c)
		}
		byContender[c] = append(byContender[c], point{contender: c, procs: k.procs, median: median(vs), runs: len(vs)})
	}
	var out []point
	for _, c := range contenders {
		ps := byContender[c]
		slices.SortStableFunc(ps, func(a, b point) int { return a.procs - b.procs })
		out = append(out, ps...)
	}
	return out
}

// median returns the median of vs, which must not be empty; vs is left
// unchanged.
func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}
