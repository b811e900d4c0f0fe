// Command gatewaywrk runs the servers of the gateway's wrk benchmark, one
// per process, so that each is measured (and profiled) on its own:
//
//	gatewaywrk backend -listen 127.0.0.1:18081
//	gatewaywrk bare    -listen 127.0.0.1:18082 -backend http://127.0.0.1:18081
//	gatewaywrk gateway -listen 127.0.0.1:18083 -backend http://127.0.0.1:18081
//
// The backend answers every request at once with a short body. The bare
// proxy is an httputil.ReverseProxy that rewrites as the gateway does
// (SetURL, SetXForwarded) over a transport set as the gateway's is. The
// gateway is package gateway, configured so that nothing is refused: one
// tenant, limits far above the load. -cpuprofile and -memprofile write
// profiles of the whole run, which ends on SIGINT or SIGTERM.
// benchmarks/gateway-wrk.sh drives them with wrk, beside nginx.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/groupexec/groupexec/gateway"
	"github.com/groupexec/groupexec/gateway/config"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gatewaywrk backend|bare|gateway [flags]")
		os.Exit(2)
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to serve on")
	admin := fs.String("admin", "127.0.0.1:0", "the gateway's admin address")
	backend := fs.String("backend", "", "the backend's URL (bare, gateway)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run here")
	memProfile := fs.String("memprofile", "", "write an allocation profile of the run here")
	fs.Parse(os.Args[2:])

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			log.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	if *memProfile != "" {
		runtime.MemProfileRate = 64 << 10
		defer func() {
			f, err := os.Create(*memProfile)
			if err != nil {
				log.Fatal(err)
			}
			pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}()
	}
	var err error
	switch mode {
	case "backend":
		err = serve(ctx, *listen, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			io.WriteString(w, "hello from the backend\n")
		}))
	case "bare":
		err = bare(ctx, *listen, *backend)
	case "gateway":
		err = runGateway(ctx, *listen, *admin, *backend)
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		log.Fatal(err)
	}
}

// serve runs h on addr until ctx ends.
func serve(ctx context.Context, addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		s.Close()
	}()
	if err := s.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}

// bare is the baseline: an httputil.ReverseProxy with nothing else, over
// the transport the gateway builds.
func bare(ctx context.Context, addr, backend string) error {
	u, err := url.Parse(backend)
	if err != nil {
		return err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.MaxIdleConnsPerHost = 256
	return serve(ctx, addr, &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.SetXForwarded()
		},
		Transport: tr,
		// wrk's connections closing at the end of a run cancel requests:
		// the gateway does not log those either.
		ErrorLog: log.New(io.Discard, "", 0),
	})
}

// gatewayConfig lets everything through: the load is one tenant at 32
// connections, far under every limit.
const gatewayConfig = `listen: %s
admin: %s
backends: [%s]
limits: {max_concurrency_per_group: 1024, max_in_flight_per_group: 4096}
`

func runGateway(ctx context.Context, addr, admin, backend string) error {
	cfg, err := config.Parse(fmt.Appendf(nil, gatewayConfig, addr, admin, backend))
	if err != nil {
		return err
	}
	pl, al, err := gateway.Listen(cfg)
	if err != nil {
		return err
	}
	gw, err := gateway.New(cfg, gateway.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return err
	}
	return gw.Serve(ctx, pl, al)
}
