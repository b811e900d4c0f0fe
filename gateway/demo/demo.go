package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/groupexec/groupexec/gateway"
	"github.com/groupexec/groupexec/gateway/config"
)

// Config is the gateway configuration the demo runs with; %s is the
// embedded backend's URL.
const Config = `backends: [%s]
listen: 127.0.0.1:0
admin: 127.0.0.1:0
limits:
  global_max_in_flight: 16        # the backend's capacity, shared by all tenants
  max_concurrency_per_group: 4    # a tenant runs at most 4 requests at once...
  max_in_flight_per_group: 8      # ...and holds at most 8 (4 more waiting)
  queue_timeout: 500ms
tenants: {flood: {}, alice: {}, bob: {}, carol: {}}
drain_timeout: 2s
`

// Load shape.
const (
	backendWork  = 20 * time.Millisecond // what the backend spends per request
	floodWorkers = 32                    // concurrent loops of the flooding tenant, no pause
	lightPause   = 50 * time.Millisecond // each light tenant: one loop, this pause between requests
)

// Tenants are the demo's tenants, the flooding one first.
var Tenants = []string{"flood", "alice", "bob", "carol"}

// ErrNotIsolated is returned when the run did not show isolation: a light
// tenant was refused, or the flood never was.
var ErrNotIsolated = errors.New("demo: the run did not show isolation")

// Run starts the backend, the gateway and the load, prints a table to out
// every second until d has passed (or ctx ends, when d is 0), drains the
// gateway and reports whether the light tenants were all served.
func Run(ctx context.Context, out io.Writer, d time.Duration) error {
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	be, err := startBackend()
	if err != nil {
		return err
	}
	defer be.Close()

	cfg, err := config.Parse(fmt.Appendf(nil, Config, "http://"+be.Addr))
	if err != nil {
		return err
	}
	pl, al, err := gateway.Listen(cfg)
	if err != nil {
		return err
	}
	gw, err := gateway.New(cfg, gateway.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		pl.Close()
		al.Close()
		return err
	}
	gctx, stopGateway := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- gw.Serve(gctx, pl, al) }()
	fmt.Fprintf(out, "gateway on http://%s (metrics: http://%s/metrics), backend %s, %v per request\n",
		pl.Addr(), al.Addr(), be.Addr, backendWork)
	fmt.Fprintf(out, "%q sends with %d loops back to back; %s each send one request every %v\n\n",
		Tenants[0], floodWorkers, Tenants[1:], lightPause)

	st := newStats()
	tr := &http.Transport{MaxIdleConnsPerHost: floodWorkers + len(Tenants)}
	c := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	for range floodWorkers {
		wg.Go(func() { load(ctx, c, "http://"+pl.Addr().String(), Tenants[0], 0, st) })
	}
	for _, t := range Tenants[1:] {
		wg.Go(func() { load(ctx, c, "http://"+pl.Addr().String(), t, lightPause, st) })
	}

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for sec := 1; ; sec++ {
		select {
		case <-ctx.Done():
		case <-tick.C:
			st.print(out, sec, gw)
			continue
		}
		break
	}
	wg.Wait()
	tr.CloseIdleConnections()
	stopGateway()
	if err := <-served; err != nil {
		return err
	}
	return st.summary(out)
}

// load sends requests for tenant until ctx ends, pausing between them.
func load(ctx context.Context, c *http.Client, url, tenant string, pause time.Duration, st *stats) {
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("X-Tenant", tenant)
		start := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				st.record(tenant, 0, 0)
			}
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		st.record(tenant, resp.StatusCode, time.Since(start))
		if pause > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
		}
	}
}

// backend is the embedded demo backend.
type backend struct {
	*http.Server
	Addr string
}

func startBackend() (*backend, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(backendWork):
			io.WriteString(w, "ok\n")
		case <-r.Context().Done():
		}
	}), ReadHeaderTimeout: time.Second}
	go s.Serve(l)
	return &backend{Server: s, Addr: l.Addr().String()}, nil
}

// stats is what the load loops saw, per tenant.
type stats struct {
	mu sync.Mutex
	by map[string]*tally
}

type tally struct {
	admitted, rejected, failed int
	window                     []time.Duration // latencies of admitted requests since the last print
}

func newStats() *stats {
	s := &stats{by: map[string]*tally{}}
	for _, t := range Tenants {
		s.by[t] = &tally{}
	}
	return s
}

func (s *stats) record(tenant string, code int, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.by[tenant]
	switch {
	case code >= 200 && code < 300:
		t.admitted++
		t.window = append(t.window, d)
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		t.rejected++
	default:
		t.failed++
	}
}

// print writes one table: totals so far, levels now, latency over the last
// second.
func (s *stats) print(out io.Writer, sec int, gw *gateway.Gateway) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "t=%ds\ttenant\tadmitted\trejected\trunning\twaiting\tp50\tp99\t\n", sec)
	for _, name := range Tenants {
		t := s.by[name]
		gs, _ := gw.Executor().GroupStats(name)
		p50, p99 := percentile(t.window, 50), percentile(t.window, 99)
		fmt.Fprintf(tw, "\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t\n", name, t.admitted, t.rejected, gs.RunningTasks, gs.Waiting, p50, p99)
		t.window = t.window[:0]
	}
	tw.Flush()
	fmt.Fprintln(out)
}

func percentile(ds []time.Duration, p int) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)*p/100].Round(100 * time.Microsecond).String()
}

// summary says what the run showed and returns ErrNotIsolated if it did not
// show isolation.
func (s *stats) summary(out io.Writer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	flood := s.by[Tenants[0]]
	ok := flood.rejected > 0
	for _, name := range Tenants[1:] {
		t := s.by[name]
		ok = ok && t.rejected == 0 && t.failed == 0 && t.admitted > 0
	}
	fmt.Fprintf(out, "%s: %d admitted, %d refused (429) at its own limits\n", Tenants[0], flood.admitted, flood.rejected)
	for _, name := range Tenants[1:] {
		t := s.by[name]
		fmt.Fprintf(out, "%s: %d admitted, %d refused, %d failed\n", name, t.admitted, t.rejected, t.failed)
	}
	if !ok {
		return ErrNotIsolated
	}
	fmt.Fprintln(out, "isolation held: the flood was refused, every light request was served")
	return nil
}
