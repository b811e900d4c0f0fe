// Command httpservice is a real net/http service with the admission
// middleware (package httpadmit) in front of its handler: one tenant floods
// it while three others send a light load, and the table shows the flood
// refused (429) at its own limits while every light request is served.
//
//	go run ./examples/httpservice
//
// The server listens on a loopback port chosen by the system; the clients are
// in the same process. It exits non-zero if isolation did not hold: a light
// tenant refused or failed, or the flood never refused. The verdict is taken
// from counts, not latencies, so a loaded machine changes the numbers but not
// the verdict.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/policy"
)

const (
	duration     = 3 * time.Second
	work         = 5 * time.Millisecond // what the service spends on a request
	floodWorkers = 8                    // the flood's clients, back to back
	lightPause   = 20 * time.Millisecond
)

var tenants = []string{"flood", "alpha", "bravo", "charlie"}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "httpservice:", err)
		os.Exit(1)
	}
}

func run(out io.Writer) error {
	pol, err := policy.New(
		policy.WithGlobalMaxInFlight(4),     // the service runs 4 requests at once, all tenants together
		policy.WithDefaultMaxConcurrency(2), // a tenant runs at most 2
		policy.WithDefaultMaxInFlight(4),    // and holds at most 4 admitted (2 waiting)
		policy.WithQueueTimeout(2*time.Second),
	)
	if err != nil {
		return err
	}
	ex, err := executor.New(pol)
	if err != nil {
		return err
	}
	defer ex.Close()

	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(work):
			io.WriteString(w, "ok\n")
		case <-r.Context().Done():
		}
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: httpadmit.Handler(ex, api), ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	url := "http://" + lis.Addr().String()
	fmt.Fprintf(out, "service on %s, %v per request\n%s\n", url, work, pol)
	fmt.Fprintf(out, "%q sends with %d clients back to back; %v each send one request every %v\n\n",
		tenants[0], floodWorkers, tenants[1:], lightPause)

	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	st := &stats{by: map[string]*tally{}}
	for _, t := range tenants {
		st.by[t] = &tally{}
	}
	tr := &http.Transport{MaxIdleConnsPerHost: floodWorkers + len(tenants)}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	for range floodWorkers {
		wg.Go(func() { load(ctx, client, url, tenants[0], 0, st) })
	}
	for _, t := range tenants[1:] {
		wg.Go(func() { load(ctx, client, url, t, lightPause, st) })
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for sec := 1; ctx.Err() == nil; sec++ {
		select {
		case <-ctx.Done():
		case <-tick.C:
			st.print(out, sec, ex)
		}
	}
	wg.Wait()
	tr.CloseIdleConnections()
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return st.summary(out)
}

// load sends requests as tenant until ctx ends, pausing between them.
func load(ctx context.Context, c *http.Client, url, tenant string, pause time.Duration, st *stats) {
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("X-Tenant", tenant)
		start := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			if ctx.Err() == nil { // not the end of the run
				st.record(tenant, 0, 0)
			}
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		st.record(tenant, resp.StatusCode, time.Since(start))
		if pause > 0 {
			select {
			case <-time.After(pause):
			case <-ctx.Done():
			}
		}
	}
}

// tally is what one tenant's clients saw.
type tally struct {
	served, refused, failed int
	window                  []time.Duration // latencies of served requests since the last table
}

type stats struct {
	mu sync.Mutex
	by map[string]*tally
}

func (s *stats) record(tenant string, code int, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.by[tenant]
	switch code {
	case http.StatusOK:
		t.served++
		t.window = append(t.window, d)
	case http.StatusTooManyRequests:
		t.refused++
	default:
		t.failed++
	}
}

// print writes one table: totals so far, levels now, latency over the last
// second.
func (s *stats) print(out io.Writer, sec int, ex *executor.Executor) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "t=%ds\ttenant\tserved\trefused\trunning\twaiting\tp50\tp99\t\n", sec)
	for _, name := range tenants {
		t := s.by[name]
		gs, _ := ex.GroupStats(name)
		fmt.Fprintf(tw, "\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t\n", name, t.served, t.refused, gs.RunningTasks, gs.Waiting,
			percentile(t.window, 50), percentile(t.window, 99))
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

// summary says what the run showed, and fails unless the flood was refused
// while every light request was served.
func (s *stats) summary(out io.Writer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	flood := s.by[tenants[0]]
	ok := flood.refused > 0 && flood.served > 0
	fmt.Fprintf(out, "%s: %d served, %d refused (429) at its own limits, %d failed\n", tenants[0], flood.served, flood.refused, flood.failed)
	for _, name := range tenants[1:] {
		t := s.by[name]
		ok = ok && t.refused == 0 && t.failed == 0 && t.served > 0
		fmt.Fprintf(out, "%s: %d served, %d refused, %d failed\n", name, t.served, t.refused, t.failed)
	}
	if !ok {
		return errors.New("isolation did not hold: the flood was never refused, or a light request was refused or failed")
	}
	fmt.Fprintln(out, "isolation held: the flood was refused at its own limits, every light request was served")
	return nil
}
