package gateway_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/groupexec/groupexec/gateway"
	"github.com/groupexec/groupexec/gateway/config"
)

// bound is how long any wait in these tests may take before it is a
// failure. It is a failure bound, never a pace: nothing waits for it to pass.
const bound = 10 * time.Second

// running is a gateway serving on loopback ports.
type running struct {
	gw    *gateway.Gateway
	url   string // proxy base URL
	admin string // admin base URL
	stop  func() error
	done  chan error
}

// start parses yaml (with %s replaced by backend), starts the gateway and
// stops it at the end of the test.
func start(t testing.TB, backend, yaml string, opts ...gateway.Option) *running {
	t.Helper()
	return serve(t, build(t, backend, yaml, opts...))
}

// build parses yaml (with %s replaced by backend) and makes the gateway
// that start would serve.
func build(t testing.TB, backend, yaml string, opts ...gateway.Option) *gateway.Gateway {
	t.Helper()
	cfg, err := config.Parse([]byte(fmt.Sprintf(yaml, backend)))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen, cfg.Admin = "127.0.0.1:0", "127.0.0.1:0"
	gw, err := gateway.New(cfg, append([]gateway.Option{gateway.WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return gw
}

// serve starts gw, made by build, and stops it at the end of the test. It
// returns once gw serves (Gateway.Serving), with the config it was built
// with: a reload from then on is one of a serving gateway.
func serve(t testing.TB, gw *gateway.Gateway) *running {
	t.Helper()
	return serveWith(t, gw, func(l net.Listener) net.Listener { return l })
}

// serveWith is serve with the proxy's listener wrapped by wrap: a test
// sets what the gateway's own sockets are by it.
func serveWith(t testing.TB, gw *gateway.Gateway, wrap func(net.Listener) net.Listener) *running {
	t.Helper()
	cfg := gw.Config()
	pl, al, err := gateway.Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pl = wrap(pl)
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{gw: gw, url: "http://" + pl.Addr().String(), admin: "http://" + al.Addr().String(), done: make(chan error, 1)}
	go func() { r.done <- gw.Serve(ctx, pl, al) }()
	var stopped bool
	var serr error
	r.stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			select {
			case serr = <-r.done:
			case <-time.After(bound):
				t.Fatal("Serve did not return")
			}
		}
		return serr
	}
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	select {
	case <-gw.Serving():
	case err := <-r.done:
		stopped, serr = true, err
		t.Fatalf("Serve returned before serving: %v", err)
	case <-time.After(bound):
		t.Fatal("Serve did not start serving")
	}
	return r
}

const minimal = "backends: [%s]\n"

// backend starts an httptest server; it is closed at the end of the test.
func backend(t testing.TB, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

// hmacSecretFile writes a 32-byte HS256 secret to a file, for
// tenant.bearer.hmac_secret_file, and returns the secret and the file.
func hmacSecretFile(t testing.TB) ([]byte, string) {
	t.Helper()
	secret := []byte(strings.Repeat("s", 32))
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	return secret, file
}

// hs256 returns claims as a JWT signed with HS256 and key.
func hs256(key []byte, claims map[string]any) string {
	p, _ := json.Marshal(claims)
	s := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + base64.RawURLEncoding.EncodeToString(p)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(s))
	return s + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// recorder is a backend that notes a line for each request it gets.
type recorder struct {
	*httptest.Server
	mu    sync.Mutex
	lines []string
}

// recording starts a backend that answers 200 and notes line(r) for each
// request r.
func recording(t testing.TB, line func(r *http.Request) string) *recorder {
	t.Helper()
	rec := &recorder{}
	rec.Server = backend(t, func(w http.ResponseWriter, r *http.Request) {
		l := line(r)
		rec.mu.Lock()
		rec.lines = append(rec.lines, l)
		rec.mu.Unlock()
	})
	return rec
}

// got returns the lines noted so far.
func (rec *recorder) got() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.lines)
}

// reset forgets the lines noted so far.
func (rec *recorder) reset() {
	rec.mu.Lock()
	rec.lines = nil
	rec.mu.Unlock()
}

// client makes requests without keeping connections between tests.
func client(t testing.TB) *http.Client {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: bound}
}

// do sends a request for tenant and returns the response with its body read.
func do(t *testing.T, c *http.Client, method, url, tenant string, body io.Reader, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if tenant != "" {
		req.Header.Set("X-Tenant", tenant)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// goDo sends a GET for tenant in the background; the channel gets its
// status, or 0 if it failed (reported with t.Errorf: t.Fatal must not be
// called off the test's goroutine).
func goDo(t *testing.T, c *http.Client, url, tenant string) <-chan int {
	done := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("X-Tenant", tenant)
		resp, err := c.Do(req)
		if err != nil {
			t.Errorf("GET %s for %s: %v", url, tenant, err)
			done <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	return done
}

// refusal decodes the gateway's JSON answer.
func refusal(t *testing.T, body string) (code, reason, tenant string) {
	t.Helper()
	var v struct{ Error, Reason, Tenant string }
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("body %q is not the gateway's JSON: %v", body, err)
	}
	return v.Error, v.Reason, v.Tenant
}

// ns is the default metrics namespace, which metric and series prefix to
// the names they are given.
const ns = "groupexec_"

// metric returns the value of the counter or gauge name (in namespace ns)
// with the given labels (name=value pairs), or 0 if there is no such series.
func metric(t testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	return gatherValue(t, g, ns+name, labels...)
}

// gatherValue is metric for a name in full.
func gatherValue(t testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.Metric {
			for i := 0; i+1 < len(labels); i += 2 {
				if labelValue(m, labels[i]) != labels[i+1] {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			}
		}
	}
	return 0
}

// series counts the series of name (in namespace ns).
func series(t *testing.T, g prometheus.Gatherer, name string) int {
	t.Helper()
	name = ns + name
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.Metric)
		}
	}
	return 0
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// gate is a backend handler that holds requests until released, and says
// when each has arrived. Requests of tenants in pass are answered at once.
type gate struct {
	arrived chan string // the X-Tenant of each held request, as it arrives
	release chan struct{}
	pass    map[string]bool
}

func newGate(pass ...string) *gate {
	g := &gate{arrived: make(chan string, 1000), release: make(chan struct{}), pass: map[string]bool{}}
	for _, p := range pass {
		g.pass[p] = true
	}
	return g
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.pass[r.Header.Get("X-Tenant")] {
		io.WriteString(w, "passed")
		return
	}
	g.arrived <- r.Header.Get("X-Tenant")
	select {
	case <-g.release:
		io.WriteString(w, "released")
	case <-r.Context().Done():
	}
}

// gated starts a gateway (see start) in front of a gate backend.
func gated(t *testing.T, yaml string, pass ...string) (*gate, *running) {
	t.Helper()
	g := newGate(pass...)
	return g, start(t, backend(t, g.ServeHTTP).URL, yaml)
}

// await waits for n arrivals.
func (g *gate) await(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-g.arrived:
		case <-time.After(bound):
			t.Fatalf("backend request did not arrive")
		}
	}
}

// eventually polls cond until it holds, failing the test after bound. For
// states that no event announces (a server's readiness as an outsider sees it).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// eventuallyMoving is eventually for a wait whose length grows with the work
// it waits for, and with how little CPU the machine lends: it polls cond
// until it holds, failing the test only when progress has not changed for
// bound, so that its margin comes from the work's pace, not the machine's.
func eventuallyMoving(t *testing.T, what string, progress func() int64, cond func() bool) {
	t.Helper()
	last := progress()
	deadline := time.Now().Add(bound)
	for !cond() {
		if p := progress(); p != last {
			last, deadline = p, time.Now().Add(bound)
		} else if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: no progress in %v (at %d)", what, bound, p)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// get is do for a GET without body or tenant.
func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, body := do(t, c, http.MethodGet, url, "", nil)
	return resp.StatusCode, strings.TrimSpace(body)
}

// Metric names the tests read.
const requestsTotal = "gateway_requests_total"
const inGatewayGauge = "gateway_requests_in_flight"

// counted returns how many requests gateway_requests_total has counted, of
// every tenant and status. A request is counted as it leaves the gateway,
// once it is out of gateway_requests_in_flight: a test that reads its
// status waits for it to be counted, not only for it to leave.
func counted(t testing.TB, g prometheus.Gatherer) float64 {
	t.Helper()
	return sumOf(t, g, requestsTotal)
}

// sumOf adds every series of the counter name (in namespace ns).
func sumOf(t testing.TB, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == ns+name {
			for _, m := range mf.Metric {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}
