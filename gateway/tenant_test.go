package gateway_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/groupexec/groupexec/gateway"
	"github.com/groupexec/groupexec/gateway/config"
)

func TestExtractTenant(t *testing.T) {
	hdr := config.Tenant{From: config.FromHeader, Header: "X-Tenant", PathPrefix: "/"}
	host := config.Tenant{From: config.FromHost, Header: "X-Tenant", PathPrefix: "/"}
	path := config.Tenant{From: config.FromPath, Header: "X-Tenant", PathPrefix: "/t/"}
	for _, tc := range []struct {
		t       config.Tenant
		url     string
		header  string
		want    string
		invalid bool
	}{
		{hdr, "http://h/x", "acme", "acme", false},
		{hdr, "http://h/x", "  acme ", "acme", false},
		{hdr, "http://h/x", "", "", false},
		{hdr, "http://h/x", "a b", "", true},
		{hdr, "http://h/x", "_overflow", "", true},
		{host, "http://Acme.Example.com:8080/x", "", "acme.example.com", false},
		{host, "http://[2001:DB8::1]:80/x", "", "2001:db8::1", false},
		// An IP literal is its canonical form, one key however spelt; one
		// starting with "::" gets a leading 0, a key's first character
		// being a letter or digit.
		{host, "http://[::1]:80/x", "", "0::1", false},
		{host, "http://[0:0:0:0:0:0:0:1]/x", "", "0::1", false},
		{host, "http://[0::1]:80/x", "", "0::1", false},
		{host, "http://[::ffff:127.0.0.1]/x", "", "127.0.0.1", false},
		{host, "http://[::FFFF:7f00:1]:80/x", "", "127.0.0.1", false},
		{host, "http://[2001:0DB8:0:0::1]/x", "", "2001:db8::1", false},
		// A zone names an interface of the client's: no key has one.
		{host, "http://[fe80::1%25eth0]:80/x", "", "", true},
		{host, "http://[::ffff:127.0.0.1%25eth0]/x", "", "", true},
		// An IPv4 address in any spelling a browser or resolver reads as
		// one (inet_aton's) is its dotted quad; a host ending in a
		// number that is no address so read names none.
		{host, "http://127.1/x", "", "127.0.0.1", false},
		{host, "http://0x7f.0.0.1:80/x", "", "127.0.0.1", false},
		{host, "http://0X7F.0.0.1/x", "", "127.0.0.1", false},
		{host, "http://2130706433/x", "", "127.0.0.1", false},
		{host, "http://0x7f000001/x", "", "127.0.0.1", false},
		{host, "http://0177.0.0.1/x", "", "127.0.0.1", false},
		{host, "http://127.000.000.001/x", "", "127.0.0.1", false},
		{host, "http://127.0.1./x", "", "127.0.0.1", false},
		{host, "http://10.0x10.65535/x", "", "10.16.255.255", false},
		{host, "http://1.2.3.256/x", "", "", true},
		{host, "http://1.2.3.4.5/x", "", "", true},
		{host, "http://4294967296/x", "", "", true},
		{host, "http://08.0.0.1/x", "", "", true},
		{host, "http://acme.0x1/x", "", "", true},
		{host, "http://acme.09/x", "", "", true},
		{host, "http://v1.example.com/x", "", "v1.example.com", false},
		{host, "http://a.0xg/x", "", "a.0xg", false}, // not hex: a name
		{host, "http://h/x", "ignored", "h", false},
		// A fully qualified name is the same host: its trailing dot, the
		// root's empty label, is not part of the key.
		{host, "http://acme.example.com./x", "", "acme.example.com", false},
		{host, "http://Acme.Example.com.:8080/x", "", "acme.example.com", false},
		{path, "http://h/t/acme/orders/1", "", "acme", false},
		{path, "http://h/t/acme", "", "acme", false},
		{path, "http://h/other/acme", "", "", false},
		{path, "http://h/t/", "", "", false},
		{path, "http://h/t/%2e%2e/", "", "..", true},
		// The key is the segment as sent: an escaped slash cannot split it
		// into another tenant, nor an escaped letter spell one.
		{path, "http://h/t/acme%2Fevil/x", "", "", true},
		{path, "http://h/t/%61cme/x", "", "", true},
		// A prefix matches only as written, but a path that matches it
		// once decoded names a tenant to a backend that decodes before
		// it routes (most do): it is refused.
		{path, "http://h/%74/acme/x", "", "", true},
		{path, "http://h/%78/acme/x", "", "", false}, // decoded, it still names no tenant
	} {
		r := httptest.NewRequest(http.MethodGet, tc.url, nil)
		if tc.header != "" {
			r.Header.Set("X-Tenant", tc.header)
		}
		got, err := gateway.ExtractTenant(&tc.t, r)
		if tc.invalid {
			if !errors.Is(err, gateway.ErrInvalidTenant) {
				t.Errorf("%s %q: err %v, want ErrInvalidTenant", tc.url, tc.header, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s %q (%s): %q, %v; want %q", tc.url, tc.header, tc.t.From, got, err, tc.want)
		}
	}
}

// With tenant.from host, the spellings of one IP address are one tenant:
// counted once against that tenant's limits, never a group of their own
// with the default limits beside it.
func TestHostTenantIPSpellingsAreOneTenant(t *testing.T) {
	g, gw := gated(t, minimal+"tenant: {from: host}\nlimits: {max_in_flight_per_group: 8}\n"+
		"tenants:\n  \"0::1\": {max_in_flight: 1}\n  127.0.0.1: {max_in_flight: 1}\n")
	c := client(t)
	for _, tc := range []struct {
		key    string
		others []string
	}{
		{"0::1", []string{"[::1]", "[0:0:0:0:0:0:0:1]", "[0::1]:80", "[::0:1]"}},
		{"127.0.0.1", []string{"[::ffff:127.0.0.1]", "[::ffff:7f00:1]:8080", "[0:0:0:0:0:ffff:127.0.0.1]",
			"127.1", "0x7f.0.0.1", "2130706433:80", "0177.0.0.1", "127.0.0.1."}},
	} {
		held := make(chan int, 1)
		go func() {
			req, _ := http.NewRequest(http.MethodGet, gw.url, nil)
			req.Host = tc.key
			if strings.Contains(tc.key, ":") {
				req.Host = "[" + tc.key + "]"
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Errorf("%s: %v", req.Host, err)
				held <- 0
				return
			}
			resp.Body.Close()
			held <- resp.StatusCode
		}()
		g.await(t, 1) // the tenant's one place is taken
		for _, host := range tc.others {
			req, _ := http.NewRequest(http.MethodGet, gw.url, nil)
			req.Host = host
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", host, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if code, _, tenant := refusal(t, string(body)); resp.StatusCode != http.StatusTooManyRequests || code != "rejected" || tenant != tc.key {
				t.Errorf("Host %s while %s holds its place: %d %s for tenant %q; want 429 rejected for %q", host, tc.key, resp.StatusCode, body, tenant, tc.key)
			}
		}
		g.release <- struct{}{}
		if code := <-held; code != http.StatusOK {
			t.Errorf("Host %s: %d", tc.key, code)
		}
	}
	if n := gw.gw.LiveTenants(); n != 0 {
		t.Errorf("%d unconfigured tenants live, want 0", n)
	}
}

// A tenant header sent twice is one value, "a, b" (RFC 9110 5.3), and no
// key: the first line is not taken, which would let a client speak for a
// trusted proxy that adds its line after the client's.
func TestExtractTenantHeaderTwice(t *testing.T) {
	hdr := config.Tenant{From: config.FromHeader, Header: "X-Tenant", PathPrefix: "/"}
	for _, lines := range [][]string{{"victim", "mallory"}, {"acme", "acme"}, {"", "acme"}} {
		r := httptest.NewRequest(http.MethodGet, "http://h/x", nil)
		r.Header["X-Tenant"] = lines
		if key, err := gateway.ExtractTenant(&hdr, r); !errors.Is(err, gateway.ErrInvalidTenant) {
			t.Errorf("X-Tenant %q: %q, %v; want ErrInvalidTenant", lines, key, err)
		}
	}
}

// FuzzExtractTenant: whatever a request carries, the key is "" or valid,
// never an error other than ErrInvalidTenant.
func FuzzExtractTenant(f *testing.F) {
	for _, s := range []struct{ from, header, host, path string }{
		{"header", "acme", "h", "/"}, {"host", "", "Acme.com:80", "/x"}, {"path", "", "h", "/t/acme/x"},
		{"header", "a\x00b", "h", "/"}, {"host", "", "[::1]:1", "/"}, {"path", "", "h", "/t//x"},
		{"path", "", "h", "/x/..;/t/acme"}, {"path", "", "h", "/t\\acme/x"}, {"path", "", "h", "/%74/acme"},
	} {
		f.Add(s.from, s.header, s.host, s.path)
	}
	f.Fuzz(func(t *testing.T, from, header, host, path string) {
		cfg := config.Tenant{From: from, Header: "X-Tenant", PathPrefix: "/t/"}
		r := &http.Request{Method: "GET", Host: host, URL: &url.URL{Path: path}, Header: http.Header{"X-Tenant": {header}}}
		key, err := gateway.ExtractTenant(&cfg, r)
		if err != nil && !errors.Is(err, gateway.ErrInvalidTenant) {
			t.Fatalf("unexpected error %v", err)
		}
		if err == nil && key != "" && !config.ValidTenant(key) {
			t.Fatalf("invalid key %q accepted", key)
		}
	})
}

// A tenant arriving while max_groups others are live shares the overflow
// group; configured tenants and the default group never do.
func TestOverflowGroup(t *testing.T) {
	g, gw := gated(t, minimal+"tenant: {max_groups: 2}\ntenants: {vip: {share: 2}}\nlimits: {max_concurrency_per_group: 4}\n")
	c := client(t)
	var wg sync.WaitGroup
	for _, tenant := range []string{"a", "b", "c", "d", "vip", ""} {
		wg.Go(func() { do(t, c, http.MethodGet, gw.url, tenant, nil) })
	}
	g.await(t, 6)
	if n := gw.gw.LiveTenants(); n != 2 {
		t.Errorf("live tenants %d, want 2", n)
	}
	ov, ok := gw.gw.Executor().GroupStats(gateway.OverflowGroup)
	if !ok || ov.RunningTasks != 2 {
		t.Errorf("overflow group: %+v", ov)
	}
	for _, grp := range []string{"vip", "anonymous"} {
		if s, ok := gw.gw.Executor().GroupStats(grp); !ok || s.RunningTasks != 1 {
			t.Errorf("group %s: %+v", grp, s)
		}
	}
	close(g.release)
	wg.Wait()
	if n := gw.gw.LiveTenants(); n != 0 {
		t.Errorf("live tenants after: %d", n)
	}
}

// Random tenant keys cannot grow the gateway. While more tenants than
// max_groups have requests in flight, max_groups of them are live and the
// rest share the overflow group; and however many come and go, the
// executor keeps a bounded number of groups, metrics a bounded number of
// series, and the heap does not grow with the number of tenants: it is
// measured after a first run of tenants has brought the connections and
// lazily built state to their steady size, and again after eight times as
// many more.
func TestTenantCardinalityBounded(t *testing.T) {
	const maxGroups = 8
	g := newGate()
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Header.Get("X-Tenant"), "held") {
			g.ServeHTTP(w, r)
		}
	})
	gw := start(t, be.URL, minimal+fmt.Sprintf("tenant: {max_groups: %d}\n"+
		"limits: {max_in_flight_per_group: 1000, max_concurrency_per_group: 1000}\n", maxGroups))

	// Twice max_groups tenants at once: the cap is reached, not raced for.
	held := make([]<-chan int, 2*maxGroups)
	for i := range held {
		held[i] = goDo(t, client(t), gw.url, fmt.Sprintf("held%d", i))
	}
	g.await(t, len(held))
	if n := gw.gw.LiveTenants(); n != maxGroups {
		t.Errorf("%d of %d tenants live at once, cap %d", n, len(held), maxGroups)
	}
	if ov, _ := gw.gw.Executor().GroupStats(gateway.OverflowGroup); ov.RunningTasks != len(held)-maxGroups {
		t.Errorf("overflow group runs %d, want %d", ov.RunningTasks, len(held)-maxGroups)
	}
	close(g.release)
	for _, st := range held {
		if s := <-st; s != 200 {
			t.Errorf("held request: status %d", s)
		}
	}

	const workers = 2 * maxGroups // more than the cap, as in the held phase, but racing for it
	tr := &http.Transport{MaxIdleConnsPerHost: workers}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: bound}
	var (
		mu       sync.Mutex
		maxLive  int
		failures int
		seed     uint64
	)
	// run sends n requests, each for a new random tenant, from workers at
	// once.
	run := func(n int) {
		var wg sync.WaitGroup
		for range workers {
			seed++
			rng := rand.New(rand.NewPCG(seed, 1))
			wg.Go(func() {
				for range n / workers {
					req, _ := http.NewRequest(http.MethodGet, gw.url, nil)
					req.Header.Set("X-Tenant", fmt.Sprintf("t%016x", rng.Uint64()))
					resp, err := c.Do(req)
					live := gw.gw.LiveTenants()
					mu.Lock()
					maxLive = max(maxLive, live)
					if err != nil || resp.StatusCode != 200 {
						failures++
					}
					mu.Unlock()
					if err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				}
			})
		}
		wg.Wait()
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	const warm, total = 1000, 8000
	run(warm)
	before := heap()
	run(total)
	after := heap()

	if failures > 0 {
		t.Errorf("%d requests failed", failures)
	}
	if maxLive > maxGroups {
		t.Errorf("%d tenants live at once, cap %d", maxLive, maxGroups)
	}
	s := gw.gw.Executor().Stats()
	if limit := maxGroups + 1; s.Groups > limit { // idle kept, and the overflow group
		t.Errorf("executor keeps %d groups, want <= %d", s.Groups, limit)
	}
	for _, name := range []string{"gateway_requests_total", "group_completed_total"} {
		if n := series(t, gw.gw.Metrics(), name); n > 4 {
			t.Errorf("%s has %d series", name, n)
		}
	}
	// 256 KiB over 8,000 tenants: 32 bytes each, less than any tenant's
	// group, series or table entry would keep.
	if after > before && after-before > 256<<10 {
		t.Errorf("heap grew by %d KiB over %d tenants", (after-before)>>10, total)
	}
	t.Logf("heap before %d KiB, after %d KiB; max live tenants %d; executor groups %d", before>>10, after>>10, maxLive, s.Groups)
}

// A path_prefix without a trailing slash still names whole segments: the
// tenant is the segment after it, and a path that merely starts with the
// same letters carries none.
func TestExtractTenantPrefixWithoutSlash(t *testing.T) {
	cfg := config.Tenant{From: config.FromPath, Header: "X-Tenant", PathPrefix: "/t"}
	for _, tc := range []struct{ url, want string }{
		{"http://h/t/acme/orders/1", "acme"},
		{"http://h/t/acme", "acme"},
		{"http://h/t", ""},
		{"http://h/tacme/orders", ""},
	} {
		r := httptest.NewRequest(http.MethodGet, tc.url, nil)
		if got, err := gateway.ExtractTenant(&cfg, r); err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.url, got, err, tc.want)
		}
	}
}

// An empty segment where the tenant's should be ("/t//acme") is a
// malformed key, refused with ErrInvalidTenant (400): served as the default
// tenant, it would send the backend a path that many routers clean into
// acme's. A path with nothing after the prefix ("/t", "/t/") names no
// tenant, as before.
func TestExtractTenantEmptySegment(t *testing.T) {
	for _, prefix := range []string{"/t", "/t/"} {
		cfg := config.Tenant{From: config.FromPath, Header: "X-Tenant", PathPrefix: prefix}
		for _, tc := range []struct {
			url     string
			invalid bool
		}{
			{"http://h/t//acme", true},
			{"http://h/t//acme/x", true},
			{"http://h/t//", true},
			{"http://h/t/", false},
			{"http://h/t", false},
		} {
			r := httptest.NewRequest(http.MethodGet, tc.url, nil)
			got, err := gateway.ExtractTenant(&cfg, r)
			if tc.invalid && !errors.Is(err, gateway.ErrInvalidTenant) {
				t.Errorf("prefix %q, %s: %q, %v; want ErrInvalidTenant", prefix, tc.url, got, err)
			}
			if !tc.invalid && (err != nil || got != "") {
				t.Errorf("prefix %q, %s: %q, %v; want no tenant", prefix, tc.url, got, err)
			}
		}
	}
}

// A path whose empty segments come before the tenant's ("//t/acme") is
// refused with ErrInvalidTenant (400) too: it names no tenant as sent, but
// a backend that merges slashes (nginx's merge_slashes, a router that
// cleans paths) serves acme's path, under the default tenant's limits.
// Empty segments that merging would not move the tenant across are left
// alone.
func TestExtractTenantMergedSlashes(t *testing.T) {
	for _, tc := range []struct {
		prefix, url string
		want        string // "": no tenant; "!": ErrInvalidTenant
	}{
		{"/t", "http://h//t/acme", "!"},
		{"/t", "http://h///t/acme/x", "!"},
		{"/t/", "http://h//t/acme", "!"},
		{"/api/t", "http://h/api//t/acme", "!"},
		{"/api/t", "http://h//api/t/acme", "!"},
		{"/t", "http://h/t/acme//x", "acme"},
		{"/t", "http://h/x//y", ""},
		{"/t", "http://h//x/t/acme", ""},
	} {
		cfg := config.Tenant{From: config.FromPath, Header: "X-Tenant", PathPrefix: tc.prefix}
		r := httptest.NewRequest(http.MethodGet, tc.url, nil)
		got, err := gateway.ExtractTenant(&cfg, r)
		switch {
		case tc.want == "!" && !errors.Is(err, gateway.ErrInvalidTenant):
			t.Errorf("prefix %q, %s: %q, %v; want ErrInvalidTenant", tc.prefix, tc.url, got, err)
		case tc.want != "!" && (err != nil || got != tc.want):
			t.Errorf("prefix %q, %s: %q, %v; want %q", tc.prefix, tc.url, got, err, tc.want)
		}
	}
}

// A path with a dot-segment ("." or "..", escaped or not) is refused with
// ErrInvalidTenant when the tenant comes from the path: "/x/../t/acme"
// names no tenant as sent, but a backend that cleans it serves acme's
// path, under the default tenant's limits. Well-behaved clients remove
// dot-segments before they send (RFC 3986, 5.2.4).
func TestExtractTenantDotSegments(t *testing.T) {
	cfg := config.Tenant{From: config.FromPath, Header: "X-Tenant", PathPrefix: "/t"}
	for _, url := range []string{
		"http://h/x/../t/acme",
		"http://h/x/%2e%2E/t/acme",
		"http://h/t/acme/../../t/beta",
		"http://h/./t/acme",
		"http://h/t/acme/.",
		"http://h/x/..",
	} {
		r := httptest.NewRequest(http.MethodGet, url, nil) // the path as sent
		if got, err := gateway.ExtractTenant(&cfg, r); !errors.Is(err, gateway.ErrInvalidTenant) {
			t.Errorf("%s: %q, %v; want ErrInvalidTenant", url, got, err)
		}
	}
	for _, url := range []string{"http://h/t/acme/a..b", "http://h/t/acme/.well-known", "http://h/t/acme/x."} {
		r := httptest.NewRequest(http.MethodGet, url, nil)
		if got, err := gateway.ExtractTenant(&cfg, r); err != nil || got != "acme" {
			t.Errorf("%s: %q, %v; want acme", url, got, err)
		}
	}
}

// A path a backend reads otherwise than as sent is refused with
// ErrInvalidTenant when the tenant comes from the path and that reading has
// a dot-segment or names another tenant: path parameters (";v", dropped by
// Tomcat and other servlet containers, so that "..;" is ".."), backslashes
// (taken for slashes by some servers), escapes (decoded before routing,
// "%2F" a slash and "%5C" a backslash included). Paths whose every reading
// names the same tenant, with no dot-segment, are served.
func TestExtractTenantLenientBackends(t *testing.T) {
	cfg := config.Tenant{From: config.FromPath, Header: "X-Tenant", PathPrefix: "/t"}
	for _, target := range []string{
		// Path parameters.
		"/x/..;/t/acme",
		"/t/acme/..;/..;/t/beta",
		"/t/acme/..;sid=1/..;x=2/t/beta",
		"/t/acme/.;/x",
		"/x/%2e%2e;/t/acme",
		"/x/..%3B/t/acme",
		"/t;v=1/acme/x",
		"/t/;/acme/x",
		// Backslashes, as sent and escaped.
		`/x\..\t/acme`,
		`/t/acme\..\..\t\beta`,
		`/t\acme/x`,
		`/\t\acme`,
		"/x%5C..%5Ct/acme",
		"/t%5Cacme/x",
		// Escaped slashes and letters.
		"/x%2F..%2Ft/acme",
		"/t%2Facme/x",
		"/%74/acme/x",
	} {
		r := rawRequest(t, target)
		if got, err := gateway.ExtractTenant(&cfg, r); !errors.Is(err, gateway.ErrInvalidTenant) {
			t.Errorf("%s: %q, %v; want ErrInvalidTenant", target, got, err)
		}
	}
	for _, tc := range []struct{ target, want string }{
		{"/t/acme/x;v=1", "acme"},
		{"/t/acme/a;b/c", "acme"},
		{`/t/acme/a\b`, "acme"},
		{"/t/acme/a%5Cb", "acme"},
		{"/t/acme/a%2Fb", "acme"},
		{"/t/acme/a%20b", "acme"},
		{"/t/acme/..a;b", "acme"},
		{"/x;v=1/y", ""},
		{`/x\y`, ""},
		{"/x/%74acme", ""},
	} {
		r := rawRequest(t, tc.target)
		if got, err := gateway.ExtractTenant(&cfg, r); err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.target, got, err, tc.want)
		}
	}
}

// rawRequest returns a request for target as a server reads it off the
// wire, backslashes and all.
func rawRequest(t *testing.T, target string) *http.Request {
	t.Helper()
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader("GET " + target + " HTTP/1.1\r\nHost: h\r\n\r\n")))
	if err != nil {
		t.Fatalf("%s: %v", target, err)
	}
	return r
}

// With tenant.from host, a Host whose port is not a number names no
// tenant: the backend gets the Host whole, in X-Forwarded-Host, and one
// that takes the last host of a list there (Rails, Werkzeug's ProxyFix)
// would serve victim.example for "acme.example:1,victim.example", which
// the gateway read as acme.example, under acme's limits.
func TestHostTenantPortNotANumberRefused(t *testing.T) {
	be := recording(t, func(r *http.Request) string { return r.Header.Get("X-Tenant") + " " + r.Header.Get("X-Forwarded-Host") })
	gw := start(t, be.URL, minimal+"tenant: {from: host}\n")
	c := client(t)
	for _, tc := range []struct {
		host string
		want int
	}{
		{"acme.example:1,victim.example", http.StatusBadRequest},
		{"acme.example:victim.example", http.StatusBadRequest},
		{"acme.example:+80", http.StatusBadRequest},
		{"[::1]:1,victim.example", http.StatusBadRequest},
		{"acme.example:8080", http.StatusOK},
		{"acme.example:", http.StatusOK},
	} {
		req, _ := http.NewRequest(http.MethodGet, gw.url, nil)
		req.Host = tc.host
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("Host %q: %v", tc.host, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Host %q: %d %q, want %d", tc.host, resp.StatusCode, body, tc.want)
		} else if tc.want != http.StatusOK {
			if code, _, _ := refusal(t, string(body)); code != "invalid_tenant" {
				t.Errorf("Host %q: %d %q, want invalid_tenant", tc.host, resp.StatusCode, body)
			}
		}
	}
	got := be.got()
	if want := "[acme.example acme.example:8080 acme.example acme.example:]"; fmt.Sprint(got) != want {
		t.Errorf("the backend got %q, want %s", got, want)
	}
}

// With tenant.from path, a query with a _url parameter, its name read as
// PHP reads it, is refused: Phalcon routes by it instead of the path, and
// would serve "/t/victim/y" for "/t/acme/x?_url=/t/victim/y" under acme's
// limits. Other parameters, and _url with another tenant source, pass.
func TestExtractTenantPathQueryRoute(t *testing.T) {
	cfg := config.Tenant{From: config.FromPath, Header: "X-Tenant", PathPrefix: "/t"}
	for _, target := range []string{
		"/t/acme/x?_url=/t/victim/y",
		"/t/acme/x?a=1&_url=%2Ft%2Fvictim",
		"/t/acme/x?.url=/t/victim/y",
		"/t/acme/x?+_url=/t/victim/y",
		"/t/acme/x?%5Furl=/t/victim/y",
		"/t/acme/x?_url[]=/t/victim/y",
		"/t/acme/x?_url",
		"/x?_url=/t/victim/y",
	} {
		r := rawRequest(t, target)
		if got, err := gateway.ExtractTenant(&cfg, r); !errors.Is(err, gateway.ErrInvalidTenant) {
			t.Errorf("%s: %q, %v; want ErrInvalidTenant", target, got, err)
		}
	}
	for _, tc := range []struct{ target, want string }{
		{"/t/acme/x?url=/t/victim/y", "acme"},
		{"/t/acme/x?x_url=1&_urls=2&_URL=3", "acme"},
		{"/t/acme/x?q=_url", "acme"},
	} {
		r := rawRequest(t, tc.target)
		if got, err := gateway.ExtractTenant(&cfg, r); err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.target, got, err, tc.want)
		}
	}
	hdr := config.Tenant{From: config.FromHeader, Header: "X-Tenant"}
	r := rawRequest(t, "/t/acme/x?_url=/t/victim/y")
	r.Header.Set("X-Tenant", "acme")
	if got, err := gateway.ExtractTenant(&hdr, r); err != nil || got != "acme" {
		t.Errorf("from: header: %q, %v; want acme", got, err)
	}
}

// With tenant.from path, a path whose rest after a ".php" segment (the
// PATH_INFO PHP runs the script with, which Symfony and Laravel route by)
// names another tenant than the path as sent is refused: the backend
// would serve "/t/victim/x" for "/index.php/t/victim/x" under the default
// tenant's limits. A rest naming no tenant, or the path's own, passes.
func TestExtractTenantPHPPathInfo(t *testing.T) {
	cfg := config.Tenant{From: config.FromPath, Header: "X-Tenant", PathPrefix: "/t"}
	for _, target := range []string{
		"/index.php/t/victim/x",
		"/app.PHP/t/victim",
		"/x/index.php/t/victim/x",
		"/t/acme/index.php/t/victim/x",
		"/index%2Ephp/t/victim/x",
		"/index.php//t/victim/x",
		"/a.php/b.php/t/victim",
	} {
		r := rawRequest(t, target)
		if got, err := gateway.ExtractTenant(&cfg, r); !errors.Is(err, gateway.ErrInvalidTenant) {
			t.Errorf("%s: %q, %v; want ErrInvalidTenant", target, got, err)
		}
	}
	for _, tc := range []struct{ target, want string }{
		{"/index.php/x", ""},
		{"/index.php", ""},
		{"/t/acme/index.php/page", "acme"},
		{"/t/acme/index.php/t/acme/y", "acme"},
		{"/t/acme/x.phpx/t/victim", "acme"},
		{"/t/acme/x.ph/t/victim", "acme"},
		{"/t/acme/a.b.c/d", "acme"},
	} {
		r := rawRequest(t, tc.target)
		if got, err := gateway.ExtractTenant(&cfg, r); err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.target, got, err, tc.want)
		}
	}
}

// With tenant.from path, a query starting with a slash that names another
// tenant than the path is refused: CodeIgniter routes such a query, on a
// path naming nothing past its script, as the path, and would serve
// "/t/victim/x" for "/index.php?/t/victim/x" under the default tenant's
// limits. A query path naming no tenant, or the path's own, passes.
func TestExtractTenantQueryPath(t *testing.T) {
	cfg := config.Tenant{From: config.FromPath, Header: "X-Tenant", PathPrefix: "/t"}
	for _, target := range []string{
		"/index.php?/t/victim/x",
		"/?/t/victim/x&a=1",
		"/?/t/victim?a=1",
		"/?//t/victim",
		"/?/%74/victim",
		"/t/acme/?/t/victim/x",
	} {
		r := rawRequest(t, target)
		if got, err := gateway.ExtractTenant(&cfg, r); !errors.Is(err, gateway.ErrInvalidTenant) {
			t.Errorf("%s: %q, %v; want ErrInvalidTenant", target, got, err)
		}
	}
	for _, tc := range []struct{ target, want string }{
		{"/index.php?/x/y", ""},
		{"/?/t", ""},
		{"/t/acme/x?/t/acme/y", "acme"},
		{"/t/acme/x?a=/t/victim", "acme"},
	} {
		r := rawRequest(t, tc.target)
		if got, err := gateway.ExtractTenant(&cfg, r); err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.target, got, err, tc.want)
		}
	}
}
