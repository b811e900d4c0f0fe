package benchmarks

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"

	"github.com/groupexec/groupexec/gateway"
	"github.com/groupexec/groupexec/gateway/config"
)

// BenchmarkGatewayProxy is the cost of a request through the gateway
// against a bare httputil.ReverseProxy (as a user writes it, and with the
// pooled copy buffers the gateway gives its own), in one process: a fast backend, the
// proxy, and 32 client goroutines over loopback keep-alive connections.
// ns/op is the whole exchange on the machine's cores; allocs/op and B/op
// count the client's and the backend's too, the same in both, so their
// difference is the proxy's. benchmarks/gateway-wrk.sh measures the same
// with wrk, each server in its own process.
func BenchmarkGatewayProxy(b *testing.B) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from the backend\n")
	}))
	defer be.Close()
	for _, name := range []string{"bare", "bare-pooled", "gateway"} {
		b.Run(name, func(b *testing.B) {
			url, stop := proxyUnderTest(b, name, be.URL)
			defer stop()
			tr := &http.Transport{MaxIdleConnsPerHost: 64}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr}
			get := func() {
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				req.Header.Set("X-Tenant", "bench")
				resp, err := c.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Errorf("status %d", resp.StatusCode)
				}
			}
			for range 64 { // warm the connections and pools
				get()
			}
			b.SetParallelism(16) // 32 clients on 2 Ps
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					get()
				}
			})
		})
	}
}

// pool is an httputil.BufferPool of 32 KiB buffers.
type pool struct{ p sync.Pool }

func (p *pool) Get() []byte {
	if b, ok := p.p.Get().(*[32 << 10]byte); ok {
		return b[:]
	}
	return new([32 << 10]byte)[:]
}

func (p *pool) Put(b []byte) { p.p.Put((*[32 << 10]byte)(b)) }

// proxyUnderTest starts the bare proxy (without or with pooled buffers) or
// the gateway in front of backend.
func proxyUnderTest(b *testing.B, name, backend string) (string, func()) {
	if name == "bare" || name == "bare-pooled" {
		u, _ := url.Parse(backend)
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.Proxy = nil
		tr.MaxIdleConnsPerHost = 256
		rp := &httputil.ReverseProxy{
			Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.SetXForwarded() },
			Transport: tr,
			ErrorLog:  log.New(io.Discard, "", 0),
		}
		if name == "bare-pooled" { // what the gateway's proxy has: pooled copy buffers
			rp.BufferPool = &pool{}
		}
		s := httptest.NewServer(rp)
		return s.URL, func() { s.Close(); tr.CloseIdleConnections() }
	}
	cfg, err := config.Parse(fmt.Appendf(nil, "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nbackends: [%s]\n"+
		"limits: {max_concurrency_per_group: 1024, max_in_flight_per_group: 4096}\n", backend))
	if err != nil {
		b.Fatal(err)
	}
	pl, al, err := gateway.Listen(cfg)
	if err != nil {
		b.Fatal(err)
	}
	gw, err := gateway.New(cfg, gateway.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gw.Serve(ctx, pl, al) }()
	return "http://" + pl.Addr().(*net.TCPAddr).String(), func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}
}
