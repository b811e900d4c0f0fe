package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// probeTTL is how long a backend probe's answer is reused: /readyz and the
// gateway_degraded gauge may be polled often, and a dial per poll per
// backend would be load of its own.
const probeTTL = time.Second

// probeTimeout bounds one probe's dial.
const probeTimeout = time.Second

// health answers whether the gateway can serve: not draining, at least one
// backend accepting TCP connections, and not every backend's breaker open.
type health struct {
	state    func() *state
	inflight *tracker
	unready  atomic.Bool     // set at the start of a drain_delay
	closed   context.Context // ends when the gateway closes: a probe then stops at once

	mu      sync.Mutex
	checked time.Time
	up      bool
	stopped bool // closed: no more probes
}

// close waits for a probe in progress, which the end of h.closed cuts
// short, and makes later checks report the backends unreachable without
// dialling them.
func (h *health) close() {
	h.mu.Lock()
	h.stopped = true
	h.up = false
	h.mu.Unlock()
}

func newHealth(st func() *state, t *tracker, closed context.Context) *health {
	return &health{state: st, inflight: t, closed: closed}
}

// addr is the host:port a backend URL is dialled at.
func addr(b *url.URL) string {
	port := b.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[b.Scheme]
	}
	return net.JoinHostPort(b.Hostname(), port)
}

// ready returns "" when the gateway is ready, else why not.
func (h *health) ready() string {
	if h.unready.Load() || h.inflight.draining() {
		return "draining"
	}
	if !h.backendUp() {
		return "no backend reachable"
	}
	if bs := h.state().breakers; len(bs) > 0 && len(h.open()) == len(bs) {
		return "every backend's breaker is open"
	}
	return ""
}

// open lists the backends whose breakers are open, with how long each
// stays open.
func (h *health) open() []string {
	var open []string
	for _, b := range h.state().breakers {
		if d := b.openFor(); d > 0 {
			open = append(open, fmt.Sprintf("%s (for %v)", b.name, d.Round(time.Millisecond)))
		}
	}
	return open
}

func (h *health) degraded() bool { return h.ready() != "" }

// backendUp dials the backends, all at once and at most once per
// probeTTL, and reports whether any accepted. Concurrent callers share one
// probe, which runs to its end (at most probeTimeout) even if its caller
// goes away: its answer is kept for every caller until probeTTL has
// passed, and a probe cut short by an impatient client would report the
// backends unreachable to all of them. Only the gateway's Close cuts a
// probe short, so that none outlives the gateway (or the admin server's
// shutdown, which follows Close): every dial has ended when it returns.
func (h *health) backendUp() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped || time.Since(h.checked) < probeTTL {
		return h.up
	}
	h.up = false
	ctx, cancel := context.WithTimeout(h.closed, probeTimeout)
	defer cancel()
	// The backends are dialled at once: one whose dial hangs (a host down
	// behind a firewall) must not spend the others' time.
	backends := h.state().backends
	accepted := make(chan bool, len(backends))
	var dials sync.WaitGroup
	for _, b := range backends {
		dials.Go(func() {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", addr(b))
			if err == nil {
				c.Close()
			}
			accepted <- err == nil
		})
	}
	for range backends {
		if <-accepted {
			h.up = true
			break
		}
	}
	// The dials still running are no longer needed: they end at once,
	// and none outlives the probe.
	cancel()
	dials.Wait()
	h.checked = time.Now()
	return h.up
}

// AdminHandler serves /metrics (Prometheus), /healthz (the process is up),
// /readyz (503 while draining, while no backend is reachable, or while
// every backend's breaker is open; each open breaker is listed in the body,
// one a line) and POST /reload (ReloadFile: 200, or 400 with every problem
// of the file, one a line, the old config kept; 409 without WithConfigFile;
// 503 once the gateway is closed), a refusal logged as an applied reload is.
// Serve runs it on the admin address, off the proxy port.
func (g *Gateway) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g.m.reg, promhttp.HandlerOpts{ErrorLog: g.errLog}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("POST /reload", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := g.ReloadFile(); err != nil {
			// Without a file the gateway, not the request, is at fault,
			// and asking again will not help until it is restarted with
			// one: 409, not the 400 of a file with errors.
			code := http.StatusBadRequest
			switch {
			case errors.Is(err, ErrNoConfigFile):
				code = http.StatusConflict
			case errors.Is(err, ErrClosed):
				// The end of a drain: the file may be fine, and there
				// is no gateway left to take it.
				code = http.StatusServiceUnavailable
			}
			// Logged as a reload applied is ("config reloaded"), and as
			// the command logs a refused SIGHUP: the answer reaches only
			// whoever asked, and the log is where the operator looks for
			// why the config in force is not the file's.
			if code == http.StatusServiceUnavailable {
				g.log.Info("POST /reload after the gateway closed: not reloaded")
			} else {
				g.log.Error("config reload refused, the old config is kept", "by", "POST /reload", "err", err.Error())
			}
			w.WriteHeader(code)
			fmt.Fprintf(w, "%v\n", err)
			return
		}
		io.WriteString(w, "reloaded\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		why := g.health.ready()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if why != "" {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %s\n", why)
		} else {
			io.WriteString(w, "ready\n")
		}
		for _, o := range g.health.open() {
			fmt.Fprintf(w, "breaker open: %s\n", o)
		}
	})
	return mux
}
