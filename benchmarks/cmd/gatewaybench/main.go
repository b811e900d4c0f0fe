// Command gatewaybench measures the groupexec gateway (package gateway)
// against a bare httputil.ReverseProxy, on loopback, with the open- and
// closed-loop generators of package loadgen. It starts every server in
// process: a backend, the bare proxy and the gateway, each on its own
// loopback port, and the load goes over real TCP.
//
//	go run ./cmd/gatewaybench -svg gateway-isolation.svg | tee gateway.txt
//
// Three parts, each bounded (about 2.5 minutes with the defaults):
//
//   - latency overhead: the same constant rate through the bare proxy and the
//     gateway, alternating A/B, p50 and p99 compared within each pair;
//   - throughput: a closed loop of a fixed number of clients through each,
//     alternating, requests per second compared within each pair;
//   - isolation: a heavy tenant at 5x the capacity of a fixed-capacity
//     backend and a light tenant, through the gateway and through the bare
//     proxy, against the light tenant alone.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/groupexec/groupexec/benchmarks/internal/stats"

	"github.com/groupexec/groupexec/benchmarks/loadgen"
)

// params are the bench's knobs; defaults in main.
type params struct {
	// overhead and throughput
	repeats      int           // A/B pairs of latency runs
	tputRepeats  int           // A/B pairs of throughput runs
	delay        time.Duration // the fixed backend's latency
	rate         float64       // open-loop rate of the latency runs
	latencyRun   time.Duration // one latency run
	clients      int           // closed-loop clients of the throughput runs
	throughputRn time.Duration // one throughput run
	// isolation
	slots      int           // the capacity backend's concurrent requests
	service    time.Duration // ... each taking this long
	heavyX     float64       // the heavy tenant's rate, in backend capacities
	lightRate  float64       // the light tenant's rate
	isoRun     time.Duration // each loaded run
	baseRun    time.Duration // each light-only run
	timeout    time.Duration // clients give up after this
	bucket     time.Duration // chart resolution
	svg        string        // chart path; "" for none
	parts      string        // which parts: o(verhead), t(hroughput), i(solation)
	chartTitle string
	cpuProfile string // CPU profile of the first gateway throughput run; "" for none
}

func main() {
	var p params
	flag.IntVar(&p.repeats, "repeats", 5, "A/B pairs of the latency runs")
	flag.IntVar(&p.tputRepeats, "throughput-repeats", 12, "A/B pairs of the throughput runs")
	flag.DurationVar(&p.delay, "delay", time.Millisecond, "fixed backend latency (overhead runs)")
	flag.Float64Var(&p.rate, "rate", 1000, "requests/s of the latency runs")
	flag.DurationVar(&p.latencyRun, "latency-run", 4*time.Second, "length of one latency run")
	flag.IntVar(&p.clients, "clients", 64, "concurrent clients of the throughput runs")
	flag.DurationVar(&p.throughputRn, "throughput-run", 1500*time.Millisecond, "length of one throughput run")
	flag.IntVar(&p.slots, "slots", 4, "capacity backend: requests served at once")
	flag.DurationVar(&p.service, "service", 20*time.Millisecond, "capacity backend: time per request")
	flag.Float64Var(&p.heavyX, "heavy", 5, "heavy tenant's rate, in multiples of the backend's capacity")
	flag.Float64Var(&p.lightRate, "light", 20, "light tenant's rate, requests/s")
	flag.DurationVar(&p.isoRun, "isolation-run", 15*time.Second, "length of each loaded isolation run")
	flag.DurationVar(&p.baseRun, "baseline-run", 10*time.Second, "length of each light-only run")
	flag.DurationVar(&p.timeout, "timeout", 2*time.Second, "client timeout per request")
	flag.DurationVar(&p.bucket, "bucket", 500*time.Millisecond, "chart bucket")
	flag.StringVar(&p.svg, "svg", "", "write the isolation chart (SVG) here")
	flag.StringVar(&p.parts, "parts", "oti", "parts to run: o overhead, t throughput, i isolation")
	flag.StringVar(&p.chartTitle, "title", "gateway isolation", "chart title")
	flag.StringVar(&p.cpuProfile, "cpuprofile", "", "write a CPU profile of the first gateway throughput run here (the whole process: load generator and backend included)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, p); err != nil {
		fmt.Fprintln(os.Stderr, "gatewaybench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, p params) error {
	fmt.Fprintf(out, "gatewaybench: GOMAXPROCS=%d, %s\n", gomaxprocs(), time.Now().UTC().Format(time.RFC3339))
	has := func(c rune) bool { return slices.Contains([]rune(p.parts), c) }
	if has('o') || has('t') {
		if err := overhead(ctx, out, p, has('o'), has('t')); err != nil {
			return err
		}
	}
	if has('i') {
		if err := isolation(ctx, out, p); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// client is a load generator's HTTP client: enough idle connections per host
// that an open loop at these rates reuses them rather than dialling anew.
func client() (*http.Client, func()) {
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4096, MaxIdleConns: 0, DisableCompression: true}
	return &http.Client{Transport: tr}, tr.CloseIdleConnections
}

func target(url, tenant string) loadgen.Target {
	return loadgen.Target{URL: url + "/", Header: http.Header{"X-Tenant": {tenant}}}
}

// overhead runs the latency and throughput comparisons against one fixed
// backend, the bare proxy and the gateway in front of it.
func overhead(ctx context.Context, out io.Writer, p params, latency, throughput bool) error {
	be, err := serve(fixedBackend(p.delay))
	if err != nil {
		return err
	}
	defer be.stop()
	bare, err := bareProxy(be.URL)
	if err != nil {
		return err
	}
	defer bare.stop()
	gw, err := startGateway(overheadGateway, be.URL)
	if err != nil {
		return err
	}
	defer gw.stop()
	// One client per proxy for the whole part, so both keep warm
	// connections from run to run.
	cBare, closeBare := client()
	defer closeBare()
	cGW, closeGW := client()
	defer closeGW()
	sides := []struct {
		name string
		c    *http.Client
		t    loadgen.Target
	}{{"bare", cBare, target(bare.URL, "bench")}, {"gateway", cGW, target(gw.URL, "bench")}}
	// order alternates A/B, B/A, so neither side always runs second (the
	// machine warms, other work comes and goes).
	order := func(i int) []int {
		if i%2 == 0 {
			return []int{0, 1}
		}
		return []int{1, 0}
	}

	if latency {
		fmt.Fprintf(out, "\n== latency overhead: %.0f req/s open loop for %v, backend %v, %d A/B pairs\n", p.rate, p.latencyRun, p.delay, p.repeats)
		// Warm-up: connections, the gateway's group, the runtime's pools.
		for _, s := range sides {
			if _, err := loadgen.Open(ctx, loadgen.OpenConfig{Target: s.t, Client: s.c, Rate: p.rate, Duration: p.latencyRun / 4, Timeout: p.timeout}); err != nil {
				return err
			}
		}
		var r50, r99, s99 []float64
		for i := range p.repeats {
			var sum [2]loadgen.Summary
			for _, k := range order(i) {
				runtime.GC() // each run starts from the same heap, not the last run's garbage
				res, err := loadgen.Open(ctx, loadgen.OpenConfig{Target: sides[k].t, Client: sides[k].c, Rate: p.rate, Duration: p.latencyRun, Timeout: p.timeout})
				if err != nil {
					return err
				}
				sum[k] = res.Summary()
				printRun(out, fmt.Sprintf("pair %d %-7s", i+1, sides[k].name), sum[k])
			}
			r50 = append(r50, ratio(sum[1].P50, sum[0].P50))
			r99 = append(r99, ratio(sum[1].P99, sum[0].P99))
			s99 = append(s99, ratio(sum[1].SentP99, sum[0].SentP99))
			fmt.Fprintf(out, "pair %d gateway/bare: p50 %.3fx p99 %.3fx (from send: p99 %.3fx)\n", i+1, r50[i], r99[i], s99[i])
		}
		m99 := stats.Median(r99)
		fmt.Fprintf(out, "RESULT latency: median gateway/bare p50 %.3fx, p99 %.3fx (pairs p99: %s; from send: median p99 %.3fx); goal p99 <= 1.15x: %s\n",
			stats.Median(r50), m99, fmtRatios(r99), stats.Median(s99), verdict(m99 <= 1.15))
	}

	if throughput {
		fmt.Fprintf(out, "\n== throughput: closed loop, %d clients for %v, backend %v, %d A/B pairs\n", p.clients, p.throughputRn, p.delay, p.tputRepeats)
		for _, s := range sides {
			if _, err := loadgen.Closed(ctx, loadgen.ClosedConfig{Target: s.t, Client: s.c, Clients: p.clients, Duration: p.throughputRn / 4, Timeout: p.timeout}); err != nil {
				return err
			}
		}
		var rt, rc []float64
		for i := range p.tputRepeats {
			var sum [2]loadgen.Summary
			var cpuPer [2]time.Duration  // process CPU per answered request
			var allocs, bytes [2]float64 // process heap allocations per answered request
			for _, k := range order(i) {
				runtime.GC()
				stopProfile := func() error { return nil }
				if p.cpuProfile != "" && i == 0 && k == 1 {
					if stopProfile, err = startProfile(p.cpuProfile); err != nil {
						return err
					}
				}
				cpu0 := stats.ProcessCPU()
				var ms0, ms1 runtime.MemStats
				runtime.ReadMemStats(&ms0)
				res, err := loadgen.Closed(ctx, loadgen.ClosedConfig{Target: sides[k].t, Client: sides[k].c, Clients: p.clients, Duration: p.throughputRn, Timeout: p.timeout})
				if err != nil {
					return err
				}
				runtime.ReadMemStats(&ms1)
				if ok := res.Summary().OK; ok > 0 {
					cpuPer[k] = (stats.ProcessCPU() - cpu0) / time.Duration(ok)
					allocs[k] = float64(ms1.Mallocs-ms0.Mallocs) / float64(ok)
					bytes[k] = float64(ms1.TotalAlloc-ms0.TotalAlloc) / float64(ok)
				}
				if err := stopProfile(); err != nil {
					return err
				}
				sum[k] = res.Summary()
				printRun(out, fmt.Sprintf("pair %d %-7s", i+1, sides[k].name), sum[k])
				fmt.Fprintf(out, "pair %d %-7s: per request (whole process) CPU %.1fµs, %.0f allocs, %.0f B\n", i+1, sides[k].name,
					float64(cpuPer[k])/float64(time.Microsecond), allocs[k], bytes[k])
			}
			rt = append(rt, sum[1].Throughput/max(sum[0].Throughput, 1e-9))
			rc = append(rc, ratio(cpuPer[0], cpuPer[1]))
			fmt.Fprintf(out, "pair %d gateway/bare: throughput %.3fx, CPU-bound throughput (bare CPU/request over gateway's) %.3fx\n", i+1, rt[i], rc[i])
		}
		m, mc := stats.Median(rt), stats.Median(rc)
		fmt.Fprintf(out, "RESULT throughput: median gateway/bare %.3fx (pairs: %s); goal >= 0.85x: %s\n", m, fmtRatios(rt), verdict(m >= 0.85))
		fmt.Fprintf(out, "RESULT CPU per request: median bare/gateway %.3fx (pairs: %s): the throughput ratio of a CPU-bound machine, robust to other processes taking CPU; goal >= 0.85x: %s\n",
			mc, fmtRatios(rc), verdict(mc >= 0.85))
	}
	return nil
}

// isolation runs the light tenant alone, then with a heavy tenant at
// heavyX times the backend's capacity, through the gateway and then through
// the bare proxy (last: without the gateway the backend's queue grows to
// the client timeout, and the runs after would start behind it).
func isolation(ctx context.Context, out io.Writer, p params) error {
	capacity := float64(p.slots) / p.service.Seconds()
	heavyRate := p.heavyX * capacity
	fmt.Fprintf(out, "\n== isolation: backend %d slots x %v = %.0f req/s; heavy %.0f req/s (%.0fx), light %.0f req/s; runs %v (light alone %v), client timeout %v\n",
		p.slots, p.service, capacity, heavyRate, p.heavyX, p.lightRate, p.isoRun, p.baseRun, p.timeout)
	be, err := serve(capacityBackend(p.slots, p.service))
	if err != nil {
		return err
	}
	defer be.stop()
	bare, err := bareProxy(be.URL)
	if err != nil {
		return err
	}
	defer bare.stop()
	per := max(p.slots-1, 1)
	gw, err := startGateway(isolationGateway, be.URL, p.slots, per, 2*per)
	if err != nil {
		return err
	}
	defer gw.stop()

	type tenantRun struct{ heavy, light *loadgen.Results }
	runOnce := func(url string, heavy bool, d time.Duration) (tenantRun, error) {
		// Each tenant has a client of its own, as separate machines would.
		cl, closeL := client()
		defer closeL()
		ch, closeH := client()
		defer closeH()
		start := time.Now().Add(50 * time.Millisecond) // a shared time axis
		var r tenantRun
		var herr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			if heavy {
				r.heavy, herr = loadgen.Open(ctx, loadgen.OpenConfig{Target: target(url, "heavy"), Client: ch,
					Rate: heavyRate, Duration: d, Start: start, Timeout: p.timeout})
			}
		}()
		var err error
		r.light, err = loadgen.Open(ctx, loadgen.OpenConfig{Target: target(url, "light"), Client: cl,
			Rate: p.lightRate, Duration: d, Start: start, Timeout: p.timeout})
		<-done
		if err == nil {
			err = herr
		}
		return r, err
	}

	type row struct {
		name string
		r    tenantRun
	}
	var rows []row
	for _, c := range []struct {
		name  string
		url   string
		heavy bool
		d     time.Duration
	}{
		{"gateway, light alone", gw.URL, false, p.baseRun},
		{"bare, light alone", bare.URL, false, p.baseRun},
		{"gateway, heavy+light", gw.URL, true, p.isoRun},
		{"bare, heavy+light", bare.URL, true, p.isoRun},
	} {
		r, err := runOnce(c.url, c.heavy, c.d)
		if err != nil {
			return err
		}
		rows = append(rows, row{c.name, r})
		if r.heavy != nil {
			printRun(out, c.name+": heavy", r.heavy.Summary())
		}
		printRun(out, c.name+": light", r.light.Summary())
	}

	gwBase, bareBase := rows[0].r.light.Summary(), rows[1].r.light.Summary()
	gwL, gwH := rows[2].r.light.Summary(), rows[2].r.heavy.Summary()
	bL, bH := rows[3].r.light.Summary(), rows[3].r.heavy.Summary()
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| run | light OK | light p50 | light p99 | light p99 / alone | heavy OK | heavy 429 | heavy errors | heavy p99 |")
	fmt.Fprintln(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	fmt.Fprintf(out, "| gateway, light alone | %s | %s | %s | | | | | |\n", pct(gwBase), ms(gwBase.P50), ms(gwBase.P99))
	fmt.Fprintf(out, "| gateway, heavy %.0fx + light | %s | %s | %s | %.2fx | %d | %d | %d | %s |\n", p.heavyX, pct(gwL), ms(gwL.P50), ms(gwL.P99),
		ratio(gwL.P99, gwBase.P99), gwH.OK, gwH.Codes[http.StatusTooManyRequests], gwH.Errors, ms(gwH.P99))
	fmt.Fprintf(out, "| bare proxy, light alone | %s | %s | %s | | | | | |\n", pct(bareBase), ms(bareBase.P50), ms(bareBase.P99))
	fmt.Fprintf(out, "| bare proxy, heavy %.0fx + light | %s | %s | %s | %.2fx | %d | %d | %d | %s |\n", p.heavyX, pct(bL), ms(bL.P50), ms(bL.P99),
		ratio(bL.P99, bareBase.P99), bH.OK, bH.Codes[http.StatusTooManyRequests], bH.Errors, ms(bH.P99))
	fmt.Fprintln(out)
	okRate := gwL.SuccessRate() >= 0.99
	okP99 := ratio(gwL.P99, gwBase.P99) <= 2
	ok429 := gwH.Codes[http.StatusTooManyRequests] > 0
	fmt.Fprintf(out, "RESULT isolation: light success %s (goal >= 99%%: %s), light p99 %.2fx its p99 alone (goal <= 2x: %s), heavy 429s %d (goal > 0: %s)\n",
		pct(gwL), verdict(okRate), ratio(gwL.P99, gwBase.P99), verdict(okP99), gwH.Codes[http.StatusTooManyRequests], verdict(ok429))
	fmt.Fprintf(out, "RESULT contrast without the gateway: light success %s, light p99 %s (%.1fx its p99 alone), heavy 429s %d\n",
		pct(bL), ms(bL.P99), ratio(bL.P99, bareBase.P99), bH.Codes[http.StatusTooManyRequests])

	if p.svg != "" {
		ch := chart{Title: p.chartTitle, Bucket: p.bucket, Duration: p.isoRun, Panels: []panel{
			{Name: "through the gateway", Heavy: rows[2].r.heavy.Series(p.bucket), Light: rows[2].r.light.Series(p.bucket), Guide: 2 * gwBase.P99,
				Note: fmt.Sprintf("light: %s OK, p99 %s (alone %s); heavy: %d OK, %d x 429", pct(gwL), ms(gwL.P99), ms(gwBase.P99), gwH.OK, gwH.Codes[http.StatusTooManyRequests])},
			{Name: "through a bare httputil.ReverseProxy (no gateway)", Heavy: rows[3].r.heavy.Series(p.bucket), Light: rows[3].r.light.Series(p.bucket), Guide: 2 * bareBase.P99,
				Note: fmt.Sprintf("light: %s OK, p99 %s (alone %s); heavy: %d OK, %d errors (timeouts)", pct(bL), ms(bL.P99), ms(bareBase.P99), bH.OK, bH.Errors)},
		}}
		f, err := os.Create(p.svg)
		if err != nil {
			return err
		}
		if err := ch.write(f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		fmt.Fprintf(out, "chart: %s\n", p.svg)
	}
	return nil
}

func startProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error { pprof.StopCPUProfile(); return f.Close() }, nil
}

func printRun(out io.Writer, name string, s loadgen.Summary) {
	fmt.Fprintf(out, "%s: n=%d ok=%d (%s) 429=%d errors=%d  p50=%s p90=%s p99=%s max=%s  ok/s=%.0f  send lag p50=%s p99=%s max=%s  from send p50=%s p99=%s\n",
		name, s.N, s.OK, pct(s), s.Codes[http.StatusTooManyRequests], s.Errors, ms(s.P50), ms(s.P90), ms(s.P99), ms(s.Max), s.Throughput,
		ms(s.LagP50), ms(s.LagP99), ms(s.LagMax), ms(s.SentP50), ms(s.SentP99))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

func pct(s loadgen.Summary) string { return fmt.Sprintf("%.2f%%", 100*s.SuccessRate()) }

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func fmtRatios(xs []float64) string {
	s := ""
	for i, x := range xs {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%.3f", x)
	}
	return s
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}
