package gateway_test

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/groupexec/groupexec/gateway"
	"github.com/groupexec/groupexec/gateway/config"
)

// reloadable starts a gateway in front of backend from a config file it can
// reload; write replaces the file's body (%s is the backend).
func reloadable(t *testing.T, backend, body string) (gw *running, write func(string)) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	write = func(body string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(fmt.Sprintf("listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\n"+body, backend)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(body)
	return start(t, backend, "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\n"+body, gateway.WithConfigFile(path)), write
}

func groupLimit(t *testing.T, gw *running, group string) int {
	t.Helper()
	s, ok := gw.gw.Executor().GroupStats(group)
	if !ok {
		t.Fatalf("no group %s", group)
	}
	return s.MaxConcurrency
}

// A reload changes limits in place: raising a tenant's concurrency starts
// its waiting request at once; lowering it starts nothing new until the
// running requests are under it; a tenant added gets its limits; an
// unconfigured tenant's limits follow the new defaults while it is live.
func TestReloadChangesLimitsInPlace(t *testing.T) {
	g := newGate()
	be := backend(t, g.ServeHTTP)
	gw, write := reloadable(t, be.URL, "backends: [%s]\ntenants: {a: {max_concurrency: 1}}\n")
	c := client(t)
	first, second := goDo(t, c, gw.url, "a"), goDo(t, c, gw.url, "a")
	g.await(t, 1)
	eventually(t, "the second to wait", func() bool { s, _ := gw.gw.Executor().GroupStats("a"); return s.Waiting == 1 })

	write("backends: [%s]\ntenants: {a: {max_concurrency: 2}, b: {max_concurrency: 3}}\nlimits: {max_concurrency_per_group: 5}\n")
	if err := gw.gw.ReloadFile(); err != nil {
		t.Fatal(err)
	}
	g.await(t, 1) // the waiting request started without any release
	third := goDo(t, c, gw.url, "other")
	g.await(t, 1)
	if got := groupLimit(t, gw, "other"); got != 5 {
		t.Errorf("an unconfigured tenant live after the reload runs under %d, want the new default 5", got)
	}

	write("backends: [%s]\ntenants: {a: {max_concurrency: 1}}\n")
	if err := gw.gw.ReloadFile(); err != nil {
		t.Fatal(err)
	}
	if got := groupLimit(t, gw, "other"); got != 1 {
		t.Errorf("the live unconfigured tenant runs under %d after the defaults went back to 1", got)
	}
	fourth := goDo(t, c, gw.url, "a")
	eventually(t, "the fourth to wait", func() bool { s, _ := gw.gw.Executor().GroupStats("a"); return s.Waiting == 1 })
	if s, _ := gw.gw.Executor().GroupStats("a"); s.RunningTasks != 2 || s.MaxConcurrency != 1 {
		t.Errorf("after lowering: %+v, want the 2 running kept and the limit 1", s)
	}
	close(g.release)
	for _, done := range []<-chan int{first, second, third, fourth} {
		if code := <-done; code != 200 {
			t.Errorf("request: %d", code)
		}
	}
	if got := metric(t, gw.gw.Metrics(), "config_reloads_total", "result", "ok"); got != 2 {
		t.Errorf("config_reloads_total{result=ok} = %v", got)
	}
}

// A file with errors, or changing a key that needs a restart, is refused
// whole with every problem in line order, and the config in force stays.
func TestReloadRefusesBadFile(t *testing.T) {
	be := backend(t, func(http.ResponseWriter, *http.Request) {})
	gw, write := reloadable(t, be.URL, "backends: [%s]\ntenants: {a: {max_concurrency: 2}}\n")
	do(t, client(t), http.MethodGet, gw.url, "a", nil) // the executor keeps the group from now on
	before := gw.gw.Config()
	for _, tc := range []struct {
		name, body string
		lines      []string
	}{
		{"invalid", "backends: [%s]\ntimeouts: {read: 0s}\ntenants: {a: {max_concurrency: 0}}\nlisen: x\n",
			[]string{"line 4: timeouts.read", "line 5: tenants.a.max_concurrency", "line 6: lisen"}},
		// max_conns lowered under the client's share it had: refused
		// naming both, the caps in force kept.
		{"connections share over the total", "backends: [%s]\nmax_conns: 40\nmax_conns_per_client: 50\n",
			[]string{"line 5: max_conns_per_client: 50 is more than max_conns (40)"}},
		{"restart only", "backends: [%s]\nmax_header_bytes: 1000\nlimits: {queue_timeout: 1s}\nhttp2_max_streams: 7\n",
			[]string{"line 4: max_header_bytes: cannot change without a restart", "line 5: limits.queue_timeout: cannot change",
				"line 6: http2_max_streams: cannot change"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			write(tc.body)
			err := gw.gw.ReloadFile()
			if !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("reload: %v", err)
			}
			got := regexp.MustCompile(`line \d+: [^\n]*`).FindAllString(err.Error(), -1)
			if len(got) != len(tc.lines) {
				t.Fatalf("errors %q, want %q", got, tc.lines)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.lines[i]) {
					t.Errorf("error %d: %q, want %q...", i, got[i], tc.lines[i])
				}
			}
			if gw.gw.Config() != before || groupLimitOf(gw, "a") != 2 {
				t.Error("the refused file changed the config in force")
			}
		})
	}
	// The admin endpoint says the same.
	resp, body := do(t, client(t), http.MethodPost, gw.admin+"/reload", "", nil)
	if resp.StatusCode != 400 || !strings.Contains(body, "line 5: limits.queue_timeout") {
		t.Errorf("POST /reload: %d %q", resp.StatusCode, body)
	}
	write("backends: [%s]\ntenants: {a: {max_concurrency: 3}}\n")
	if resp, body := do(t, client(t), http.MethodPost, gw.admin+"/reload", "", nil); resp.StatusCode != 200 || groupLimitOf(gw, "a") != 3 {
		t.Errorf("POST /reload of a good file: %d %q, limit %d", resp.StatusCode, body, groupLimitOf(gw, "a"))
	}
	if got := metric(t, gw.gw.Metrics(), "config_reloads_total", "result", "error"); got != 4 {
		t.Errorf("config_reloads_total{result=error} = %v, want 4", got)
	}
}

// With breakers disabled before and after, a reload may change where they
// would be kept and their settings: it is applied, and still no breaker
// stands between a failing backend and its clients. Enabling them is
// refused, as the docs say.
func TestReloadDisabledBreakerSettings(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) })
	gw, write := reloadable(t, be.URL, "backends: [%s]\nbreaker: {enabled: false}\n")
	write("backends: [%s]\nbreaker: {enabled: false, per: tenant, consecutive_failures: 1, timeout: 1h}\n")
	if err := gw.gw.ReloadFile(); err != nil {
		t.Fatalf("reload keeping breakers disabled: %v", err)
	}
	if b := gw.gw.Config().Breaker; b.Per != config.PerTenant || b.ConsecutiveFailures != 1 {
		t.Errorf("the reload was not applied: %+v", b)
	}
	c := client(t)
	for i := range 3 {
		if resp, body := do(t, c, http.MethodGet, gw.url, "a", nil); resp.StatusCode != 500 {
			t.Fatalf("request %d: %d %q, want the backend's 500", i, resp.StatusCode, body)
		}
	}
	write("backends: [%s]\nbreaker: {per: tenant, consecutive_failures: 1, timeout: 1h}\n")
	if err := gw.gw.ReloadFile(); !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "breaker.enabled: cannot change without a restart") {
		t.Errorf("reload enabling breakers: %v", err)
	}
}

// A tenant a reload removes from the config is an unconfigured tenant from
// then on: its group runs under the unconfigured tenants' limits, not those
// the config it was configured in gave it, whether the reload changed the
// defaults or not, and after its requests have come and gone.
func TestReloadRemovedTenantGetsDefaults(t *testing.T) {
	for _, tc := range []struct {
		name, limits string
		want         int
	}{
		{"defaults kept", "", 1},
		{"defaults changed", "limits: {max_concurrency_per_group: 2}\n", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be := backend(t, func(http.ResponseWriter, *http.Request) {})
			gw, write := reloadable(t, be.URL, "backends: [%s]\ntenants: {a: {max_concurrency: 4}}\n")
			c := client(t)
			do(t, c, http.MethodGet, gw.url, "a", nil) // the executor keeps the group from now on
			write("backends: [%s]\n" + tc.limits)
			if err := gw.gw.ReloadFile(); err != nil {
				t.Fatal(err)
			}
			if got := groupLimitOf(gw, "a"); got != tc.want {
				t.Errorf("after the reload: tenant a's limit %d, want %d", got, tc.want)
			}
			do(t, c, http.MethodGet, gw.url, "a", nil) // live, then not, as an unconfigured tenant
			if got := groupLimitOf(gw, "a"); got != tc.want {
				t.Errorf("after a request: tenant a's limit %d, want %d", got, tc.want)
			}
		})
	}
}

// groupLimitOf is the concurrency limit of a group the executor keeps, or 0.
func groupLimitOf(gw *running, group string) int {
	s, _ := gw.gw.Executor().GroupStats(group)
	return s.MaxConcurrency
}

// Reloads under load lose no request: every request is answered by the
// backend while the limits swing between two files many times, and the
// last file's limits are in force at the end.
func TestReloadUnderLoad(t *testing.T) {
	var served atomic.Int64
	be := backend(t, func(w http.ResponseWriter, r *http.Request) { served.Add(1) })
	files := []string{
		"backends: [%s]\nlimits: {max_concurrency_per_group: 2, max_in_flight_per_group: 1000}\ntenants: {a: {max_concurrency: 1}}\nrate_limit: {rps: 100000}\n",
		"backends: [%s]\nlimits: {max_concurrency_per_group: 8, max_in_flight_per_group: 1000, global_max_in_flight: 6}\ntenants: {a: {max_concurrency: 4, share: 2}, b: {}}\nbreaker: {timeout: 2s}\n",
	}
	gw, write := reloadable(t, be.URL, files[0])
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr, Timeout: bound}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sent, bad atomic.Int64
	for i := range 12 {
		tenant := []string{"a", "b", "c"}[i%3]
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest(http.MethodGet, gw.url, nil)
				req.Header.Set("X-Tenant", tenant)
				resp, err := c.Do(req)
				sent.Add(1)
				if err != nil || resp.StatusCode != 200 {
					bad.Add(1)
					if err == nil {
						t.Errorf("%s: %d", tenant, resp.StatusCode)
					} else {
						t.Errorf("%s: %v", tenant, err)
					}
				}
				if err == nil {
					resp.Body.Close()
				}
			}
		})
	}
	for i := range 40 {
		// Each file serves some requests before the next.
		mark := sent.Load()
		eventually(t, "requests between reloads", func() bool { return sent.Load() >= mark+25 })
		write(files[i%2])
		if err := gw.gw.ReloadFile(); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 { // a bad file now and then changes nothing
			write("backends: [%s]\nlimits: {max_concurrency_per_group: 0}\n")
			if err := gw.gw.ReloadFile(); err == nil {
				t.Fatal("a bad file was accepted")
			}
		}
	}
	close(stop)
	wg.Wait()
	if bad.Load() != 0 || served.Load() != sent.Load() {
		t.Errorf("%d of %d requests failed; the backend served %d", bad.Load(), sent.Load(), served.Load())
	}
	if s := gw.gw.Executor().Stats(); s.GlobalMaxInFlight != 6 {
		t.Errorf("global limit %d after the last reload, want 6", s.GlobalMaxInFlight)
	}
	if got := groupLimitOf(gw, "a"); got != 4 {
		t.Errorf("tenant a's limit %d after the last reload, want 4", got)
	}
	t.Logf("%d requests through 40 reloads and 4 refused ones", sent.Load())
}

// A tenant a reload configures keeps the limits the reload gave it when its
// last request, begun while it was unconfigured, leaves during the reload:
// dropping the unconfigured tenants' limits it had then must not drop the
// ones the reload has just set.
func TestReloadConfiguredTenantKeepsLimitsWhenItsLastRequestLeaves(t *testing.T) {
	g := newGate()
	be := backend(t, g.ServeHTTP)
	gw, write := reloadable(t, be.URL, "backends: [%s]\n")
	write("backends: [%s]\nlimits: {max_concurrency_per_group: 2}\n") // changed defaults: given to tenants as they become live
	if err := gw.gw.ReloadFile(); err != nil {
		t.Fatal(err)
	}
	done := goDo(t, client(t), gw.url, "a")
	g.await(t, 1)
	if got := groupLimitOf(gw, "a"); got != 2 {
		t.Fatalf("the live unconfigured tenant's limit %d, want the defaults' 2", got)
	}
	gateway.OnLimitsSet(gw.gw, func() {
		close(g.release)
		if code := <-done; code != 200 {
			t.Errorf("request: %d", code)
		}
		eventually(t, "the tenant to leave", func() bool { return gw.gw.LiveTenants() == 0 })
	})
	write("backends: [%s]\nlimits: {max_concurrency_per_group: 2}\ntenants: {a: {max_concurrency: 7}}\n")
	if err := gw.gw.ReloadFile(); err != nil {
		t.Fatal(err)
	}
	if got := groupLimitOf(gw, "a"); got != 7 {
		t.Errorf("the tenant the reload configured runs under %d, want 7", got)
	}
}

// POST /reload on a gateway given no config file (WithConfigFile) is the
// gateway's condition, not a fault of the request: 409, naming it, and
// counted as a refused reload, as a reload that changed nothing.
func TestReloadWithoutConfigFile(t *testing.T) {
	gw := start(t, tenantEcho(t), minimal)
	resp, body := do(t, client(t), http.MethodPost, gw.admin+"/reload", "", nil)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "no config file") {
		t.Errorf("POST /reload: %d %q, want 409 naming the missing file", resp.StatusCode, body)
	}
	if got := metric(t, gw.gw.Metrics(), "config_reloads_total", "result", "error"); got != 1 {
		t.Errorf("config_reloads_total{result=error} = %v, want 1", got)
	}
}

// start returns once the gateway serves with the config it was given, so
// that a test reloading at once reloads a serving gateway, never one whose
// Serve has yet to read the config (and would start with the reloaded one).
func TestStartReturnsServing(t *testing.T) {
	gw := start(t, backend(t, func(w http.ResponseWriter, r *http.Request) {}).URL, minimal)
	select {
	case <-gw.gw.Serving():
	default:
		t.Fatal("start returned before Serve serves")
	}
}

// A reload after Close (a SIGHUP or POST /reload as Serve's drain ends)
// changes nothing and says the gateway is closed: ErrClosed, and 503 at
// the admin address, not the 400 of a file with errors, which it is not.
func TestReloadAfterClose(t *testing.T) {
	be := tenantEcho(t)
	gw, write := reloadable(t, be, "backends: [%s]\nlimits: {global_max_in_flight: 5}\n")
	if err := gw.gw.Close(); err != nil {
		t.Fatal(err)
	}
	write("backends: [%s]\nlimits: {global_max_in_flight: 7}\n")
	if err := gw.gw.ReloadFile(); !errors.Is(err, gateway.ErrClosed) {
		t.Errorf("ReloadFile after Close: %v, want ErrClosed", err)
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf("listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nbackends: [%s]\nlimits: {global_max_in_flight: 7}\n", be)))
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.gw.Reload(cfg); !errors.Is(err, gateway.ErrClosed) {
		t.Errorf("Reload after Close: %v, want ErrClosed", err)
	}
	resp, body := do(t, client(t), http.MethodPost, gw.admin+"/reload", "", nil)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "closed") {
		t.Errorf("POST /reload after Close: %d %q, want 503 saying the gateway is closed", resp.StatusCode, body)
	}
	if got := *gw.gw.Config().Limits.GlobalMaxInFlight; got != 5 {
		t.Errorf("global_max_in_flight in force: %d, want the 5 the gateway closed with", got)
	}
}

// A POST /reload refused is logged, as one applied is ("config reloaded")
// and as the command logs a refused SIGHUP: the answer reaches only the
// client that asked, and the log is where an operator looks for why the
// config in force is not the file's.
func TestRefusedReloadOverHTTPIsLogged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	writeFile := func(body string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeFile("backends: [http://127.0.0.1:1]\n")
	var logs strings.Builder
	gw := build(t, "http://127.0.0.1:1", "backends: [%s]\n", gateway.WithConfigFile(path),
		gateway.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	defer gw.Close()
	writeFile("backends: [http://127.0.0.1:1]\nmax_conns: -5\n")
	rec := httptest.NewRecorder()
	gw.AdminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/reload", nil))
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("POST /reload of a bad file: %d %q", rec.Code, rec.Body)
	}
	if got := logs.String(); !strings.Contains(got, "level=ERROR") || !strings.Contains(got, "reload refused") ||
		!strings.Contains(got, "line 2: max_conns: -5") {
		t.Errorf("log %q; want an error naming the refused reload and the file's problem", got)
	}
}
