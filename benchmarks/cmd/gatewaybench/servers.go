package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/groupexec/groupexec/gateway"
	"github.com/groupexec/groupexec/gateway/config"
)

// server is one of the bench's loopback HTTP servers.
type server struct {
	URL  string
	stop func()
}

// serve runs h on a fresh loopback port until stop.
func serve(h http.Handler) (*server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	done := make(chan struct{})
	go func() { s.Serve(l); close(done) }()
	return &server{URL: "http://" + l.Addr().String(), stop: func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if s.Shutdown(ctx) != nil {
			s.Close()
		}
		<-done
	}}, nil
}

// fixedBackend answers every request after delay, at any concurrency: the
// backend of the overhead runs, whose only cost is a small, steady latency.
func fixedBackend(delay time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(delay)
		io.WriteString(w, "ok\n")
	})
}

// capacityBackend serves at most slots requests at once, each for service;
// the others wait their turn in arrival order (a channel's waiters are FIFO)
// until their client gives up. Its capacity is slots/service requests per
// second: the backend of the isolation runs.
func capacityBackend(slots int, service time.Duration) http.Handler {
	sem := make(chan struct{}, slots)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case sem <- struct{}{}:
		case <-r.Context().Done():
			return // the client (or proxy) gave up while queued
		}
		defer func() { <-sem }()
		time.Sleep(service) // work once started is finished, as most servers do
		io.WriteString(w, "ok\n")
	})
}

// upstreamTransport is the backend transport of both proxies, so that they
// differ only in what the gateway adds: the gateway's transport settings
// (gateway.New) on a clone of http.DefaultTransport.
func upstreamTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.MaxIdleConnsPerHost = 256
	return t
}

// bareProxy is the baseline: an httputil.ReverseProxy to backend with
// nothing else, rewriting as the gateway does (URL and X-Forwarded-*).
func bareProxy(backend string) (*server, error) {
	u, err := url.Parse(backend)
	if err != nil {
		return nil, err
	}
	tr := upstreamTransport()
	s, err := serve(&httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.SetXForwarded()
		},
		Transport: tr,
		// Timed-out clients make it log every cancelled request; the
		// gateway's logger is discarded too.
		ErrorLog: log.New(io.Discard, "", 0),
	})
	if err != nil {
		return nil, err
	}
	stop := s.stop
	s.stop = func() { stop(); tr.CloseIdleConnections() }
	return s, nil
}

// startGateway runs a gateway in process with the YAML config yaml (format
// with args) on loopback ports, as cmd/groupexec does.
func startGateway(yaml string, args ...any) (*server, error) {
	cfg, err := config.Parse(fmt.Appendf(nil, yaml, args...))
	if err != nil {
		return nil, err
	}
	pl, al, err := gateway.Listen(cfg)
	if err != nil {
		return nil, err
	}
	gw, err := gateway.New(cfg, gateway.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		pl.Close()
		al.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- gw.Serve(ctx, pl, al) }()
	return &server{URL: "http://" + pl.Addr().String(), stop: func() { cancel(); <-served }}, nil
}

// overheadGateway has limits far above the offered load, so that it admits
// every request and the runs measure its cost, not its refusals. Breakers
// stay on (the default), as in production: they are on the hot path.
const overheadGateway = `backends: [%s]
listen: 127.0.0.1:0
admin: 127.0.0.1:0
limits:
  global_max_in_flight: 100000
  max_in_flight_per_group: 100000
  max_concurrency_per_group: 100000
tenants: {bench: {}}
`

// isolationGateway fits the capacity backend (args: backend URL, then
// slots, slots-1, 2*(slots-1)): at most slots requests go to the backend at
// once and one tenant runs at most slots-1 of them, so a flooding tenant
// always leaves a slot for the others. It holds as many again waiting, for at
// most 100 ms; the rest is refused with 429.
const isolationGateway = `backends: [%s]
listen: 127.0.0.1:0
admin: 127.0.0.1:0
limits:
  global_max_in_flight: %d
  max_concurrency_per_group: %d
  max_in_flight_per_group: %d
  queue_timeout: 100ms
tenants: {heavy: {}, light: {}}
`
