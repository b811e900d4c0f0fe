package config_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/gateway/config"
)

// One rule for 0: left out, a key has its default; given 0, it means 0,
// which is an error wherever 0 means nothing.
func TestZeroRule(t *testing.T) {
	for _, key := range []string{
		"max_conns: 0", "max_conns_per_client: 0", "admin_max_conns: 0", "http2_max_streams: 0", "max_header_bytes: 0", "drain_timeout: 0s",
		"timeouts: {read_header: 0s}", "timeouts: {read: 0s}", "timeouts: {write: 0s}", "timeouts: {idle: 0s}",
		"timeouts: {upstream: 0s}", "body: {max_bytes: 0}", "body: {max_decoded_bytes: 0}", "body: {max_ratio: 0}",
		"body: {spool_max_bytes: 0}", "body: {spool_max_bytes_per_client: 0}",
		"breaker: {consecutive_failures: 0}", "breaker: {timeout: 0s}", "breaker: {max_timeout: 0s}",
		"breaker: {max_requests: 0}", "rate_limit: {rps: 0}", "rate_limit: {rps: 1, burst: 0}",
		"limits: {global_max_in_flight: 0}", "limits: {max_concurrency_per_group: 0}", "limits: {max_in_flight_per_group: 0}",
		"tenants: {vip: {max_concurrency: 0}}", "tenants: {vip: {share: 0}}",
	} {
		if _, err := config.Parse([]byte("backends: [http://a:1]\n" + key + "\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%s: accepted or not located: %v", key, err)
		}
	}
	c, err := config.Parse([]byte(`backends: [http://a:1]
limits: {queue_threshold_per_group: 0, global_queue_threshold: 0, queue_timeout: 0s}
tenants: {vip: {queue_threshold: 0}}
tenant: {max_groups: 0}
body: {buffer_bytes: 0}
response: {buffer_bytes: 0}
drain_delay: 0s
`))
	if err != nil {
		t.Fatalf("keys whose 0 has a meaning: %v", err)
	}
	if c.Body.BufferBytes != 0 || c.Response.BufferBytes != 0 || c.Tenant.MaxGroups != 0 || *c.Limits.QueueThresholdPerGroup != 0 {
		t.Errorf("a 0 was replaced by a default: %+v", c)
	}
	d, _ := config.Parse([]byte("backends: [http://a:1]\n"))
	if d.Body.BufferBytes != config.DefaultBodyBufferBytes || d.Tenant.MaxGroups != config.DefaultMaxGroups ||
		d.Breaker.Timeout != config.DefaultBreakerTimeout || d.MaxConns != config.DefaultMaxConns ||
		d.HTTP2MaxStreams != config.DefaultHTTP2MaxStreams || d.AdminMaxConns != config.DefaultAdminMaxConns {
		t.Errorf("omitted keys without their defaults: %+v", d)
	}
}

// max_conns_per_client defaults to an eighth of max_conns, rounded up, at
// least 64 or max_conns if fewer; given, it is what it says.
func TestMaxConnsPerClientDefault(t *testing.T) {
	for _, tc := range []struct {
		keys string
		want int
	}{
		{"", config.DefaultMaxConns / 8},
		{"max_conns: 10001\n", 1251},
		{"max_conns: 100\n", 64},
		{"max_conns: 10\n", 10},
		{"max_conns: 10\nmax_conns_per_client: 3\n", 3},
		{"max_conns_per_client: 10000\n", 10000},
	} {
		c, err := config.Parse([]byte("backends: [http://a:1]\n" + tc.keys))
		if err != nil {
			t.Fatalf("%q: %v", tc.keys, err)
		}
		if c.MaxConnsPerClient != tc.want {
			t.Errorf("%q: max_conns_per_client %d, want %d", tc.keys, c.MaxConnsPerClient, tc.want)
		}
	}
}

// body.spool_max_bytes defaults to 1 GiB, and spool_max_bytes_per_client
// to an eighth of spool_max_bytes, rounded up; given, each is what it says.
func TestSpoolMaxBytesDefaults(t *testing.T) {
	for _, tc := range []struct {
		keys           string
		total, perAddr int64
	}{
		{"", 1 << 30, 1 << 27},
		{"body: {spool_max_bytes: 1001}\n", 1001, 126},
		{"body: {spool_max_bytes: 7}\n", 7, 1},
		{"body: {spool_max_bytes: 1000, spool_max_bytes_per_client: 1000}\n", 1000, 1000},
		{"body: {spool_max_bytes_per_client: 3}\n", 1 << 30, 3},
	} {
		c, err := config.Parse([]byte("backends: [http://a:1]\n" + tc.keys))
		if err != nil {
			t.Fatalf("%q: %v", tc.keys, err)
		}
		if c.Body.SpoolMaxBytes != tc.total || c.Body.SpoolMaxBytesPerClient != tc.perAddr {
			t.Errorf("%q: spool_max_bytes %d, spool_max_bytes_per_client %d; want %d, %d",
				tc.keys, c.Body.SpoolMaxBytes, c.Body.SpoolMaxBytesPerClient, tc.total, tc.perAddr)
		}
	}
}

// Every problem of a file is reported, in line order, whichever check
// found it.
func TestErrorsInLineOrder(t *testing.T) {
	_, err := config.Parse([]byte(`listen: nope
timeouts:
  read: 2x
  write: 0s
limits: {max_in_flight_per_group: 0}
lisen: x
tenant:
  from: cookie
breaker: {per: host}
`))
	if err == nil {
		t.Fatal("no error")
	}
	var lines []int
	for _, m := range regexp.MustCompile(`line (\d+):`).FindAllStringSubmatch(err.Error(), -1) {
		n, _ := strconv.Atoi(m[1])
		lines = append(lines, n)
	}
	want := []int{1, 3, 4, 5, 6, 8, 9}
	if len(lines) != len(want) {
		t.Fatalf("lines %v, want %v:\n%v", lines, want, err)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Fatalf("lines %v, want %v:\n%v", lines, want, err)
		}
	}
	if !strings.HasSuffix(err.Error(), "backends: at least one backend URL is required") {
		t.Errorf("the missing required key is not last:\n%v", err)
	}
	if strings.Count(err.Error(), "timeouts.read:") != 1 {
		t.Errorf("a key that failed to decode is reported twice:\n%v", err)
	}
}

func TestTrustedProxies(t *testing.T) {
	c, err := config.Parse([]byte("backends: [http://a:1]\ntenant: {trusted_proxies: [10.0.0.0/8, 192.168.1.7, \"fd00::/8\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]bool{
		"10.1.2.3": true, "::ffff:10.1.2.3": true, "192.168.1.7": true, "192.168.1.8": false,
		"127.0.0.1": false, "fd00::1": true, "::1": false,
	} {
		if got := c.Tenant.Trusts(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Trusts(%s) = %v, want %v", addr, got, want)
		}
	}
	// An IPv4-mapped address or prefix is the IPv4 one, as the peer's
	// address is read: listed so, it trusts that address.
	mapped, err := config.Parse([]byte("backends: [http://a:1]\ntenant: {trusted_proxies: [\"::ffff:192.0.2.7\", \"::ffff:10.0.0.0/104\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]bool{
		"192.0.2.7": true, "::ffff:192.0.2.7": true, "10.9.9.9": true, "192.0.2.8": false, "11.0.0.1": false,
	} {
		if got := mapped.Tenant.Trusts(netip.MustParseAddr(addr)); got != want {
			t.Errorf("with IPv4-mapped trusted_proxies, Trusts(%s) = %v, want %v", addr, got, want)
		}
	}
	open, _ := config.Parse([]byte("backends: [http://a:1]\n"))
	if !open.Tenant.Trusts(netip.MustParseAddr("203.0.113.9")) {
		t.Error("with no trusted_proxies, every address should be trusted")
	}
	if _, err := config.Parse([]byte("backends: [http://a:1]\ntenant: {trusted_proxies: [10.0.0.0/33]}\n")); err == nil ||
		!strings.Contains(err.Error(), "tenant.trusted_proxies") {
		t.Errorf("bad CIDR: %v", err)
	}
}

func TestBearerKeys(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, data, 0o600)
		return p
	}
	secret := write("secret", []byte(strings.Repeat("k", 40)+"\n"))
	short := write("short", []byte("tooshort"))
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(&ek.PublicKey)
	pub := write("pub.pem", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	ek384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	der384, _ := x509.MarshalPKIXPublicKey(&ek384.PublicKey)
	pub384 := write("p384.pem", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der384}))

	for _, tc := range []struct {
		bearer string
		want   string // "" for success
	}{
		{"{hmac_secret_file: " + secret + "}", ""},
		{"{public_key_file: " + pub + ", claim: tenant}", ""},
		{"{hmac_secret_file: " + short + "}", "fewer than 32"},
		{"{public_key_file: " + pub384 + "}", "P-256"},
		{"{public_key_file: " + filepath.Join(dir, "missing") + "}", "no such file"},
		{"{}", "exactly one"},
		{"{hmac_secret_file: " + secret + ", public_key_file: " + pub + "}", "exactly one"},
	} {
		c, err := config.Parse([]byte("backends: [http://a:1]\ntenant:\n  from: bearer\n  bearer: " + tc.bearer + "\n"))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.bearer, err)
		case tc.want == "" && c.Tenant.Bearer.Key() == nil:
			t.Errorf("%s: no key loaded", tc.bearer)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "line 4")):
			t.Errorf("%s: error %v, want one on line 4 saying %q", tc.bearer, err, tc.want)
		}
	}
}

// A bearer setting invalid whatever tenant.from is, is refused with any
// from, naming the key and the value: --check passing it would not tell
// that the reload turning bearer on must fail.
func TestBearerValuesCheckedWithAnyFrom(t *testing.T) {
	for _, tc := range []struct{ bearer, want string }{
		{"{leeway: -1s}", "config: line 2: tenant.bearer.leeway: -1s is negative"},
		{`{claim: ""}`, "config: line 2: tenant.bearer.claim: must name a claim"},
	} {
		_, err := config.Parse([]byte("backends: [http://a:1]\ntenant: {from: header, bearer: " + tc.bearer + "}\n"))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v; want %s", tc.bearer, err, tc.want)
		}
	}
	if _, err := config.Parse([]byte("backends: [http://a:1]\ntenant: {bearer: {leeway: 5s, claim: tenant}}\n")); err != nil {
		t.Errorf("valid bearer values, with from header: %v", err)
	}
}

func TestTLSKeys(t *testing.T) {
	if _, err := config.Parse([]byte("backends: [http://a:1]\ntls: {cert_file: /nonexistent.pem, key_file: /nonexistent.key}\n")); err == nil ||
		!strings.Contains(err.Error(), "tls.cert_file") {
		t.Errorf("missing certificate: %v", err)
	}
	if _, err := config.Parse([]byte("backends: [http://a:1]\ntenant: {from: client_cert}\n")); err == nil ||
		!strings.Contains(err.Error(), "client_ca_file") {
		t.Errorf("client_cert without a CA: %v", err)
	}
	c, _ := config.Parse([]byte("backends: [http://a:1]\n"))
	if c.ServerTLS() != nil {
		t.Error("TLS without a tls section")
	}
}

// A number with a fraction is not an integer: a key that takes an integer
// refuses it, naming the key and the value, rather than cutting it to the
// integer below (a share of 2.7 is not 2, a limit of 0.5 is not 0). A
// float's integral value (2.0, 1e3) is still the integer it is, and rps
// takes any rate.
func TestFractionIsNotAnInteger(t *testing.T) {
	for _, tc := range []struct{ yaml, key, value string }{
		{"limits: {max_in_flight_per_group: 1.5}", "limits.max_in_flight_per_group", "1.5"},
		{"limits: {queue_threshold_per_group: 0.5}", "limits.queue_threshold_per_group", "0.5"},
		{"max_conns: 100.5", "max_conns", "100.5"},
		{"body: {max_bytes: 1024.5}", "body.max_bytes", "1024.5"},
		{"tenant: {max_groups: 10.1}", "tenant.max_groups", "10.1"},
		{"tenants: {vip: {share: 2.7}}", "tenants.vip.share", "2.7"},
		{"tenants:\n  vip:\n    max_concurrency: 0.5", "tenants.vip.max_concurrency", "0.5"},
		{"rate_limit: {rps: 1, burst: 2.5}", "rate_limit.burst", "2.5"},
		{"breaker: {max_requests: 1.9}", "breaker.max_requests", "1.9"},
		{"response: {buffer_bytes: 64.5}", "response.buffer_bytes", "64.5"},
	} {
		_, err := config.Parse([]byte("backends: [http://a:1]\n" + tc.yaml + "\n"))
		if err == nil || !strings.Contains(err.Error(), tc.key+": ") || !strings.Contains(err.Error(), tc.value) ||
			!strings.Contains(err.Error(), "integer") || strings.Count(err.Error(), tc.key+":") != 1 {
			t.Errorf("%s: %v; want one error naming %s, %s and an integer", tc.yaml, err, tc.key, tc.value)
		}
	}
	c, err := config.Parse([]byte("backends: [http://a:1]\nlimits: {max_in_flight_per_group: 2.0}\nbody: {max_bytes: 1e3}\nrate_limit: {rps: 0.5}\n"))
	if err != nil {
		t.Fatalf("integral floats and a fractional rate: %v", err)
	}
	if *c.Limits.MaxInFlightPerGroup != 2 || c.Body.MaxBytes != 1000 || c.RateLimit.RPS != 0.5 {
		t.Errorf("got %d, %d, %v; want 2, 1000, 0.5", *c.Limits.MaxInFlightPerGroup, c.Body.MaxBytes, c.RateLimit.RPS)
	}
}

// A number with a fraction in a merged mapping is refused as it is where
// written out: the decoder would cut it to the integer below.
func TestFractionInAMerge(t *testing.T) {
	for _, tc := range []struct{ yaml, key string }{
		{"tenants:\n  b: {<<: {share: 2.5}}", "tenants.b.share"},
		{"tenants:\n  b: {<<: [{max_concurrency: 3}, {share: 2.5}]}", "tenants.b.share"},
		{"<<: {max_conns: 2.5}", "max_conns"},
	} {
		_, err := config.Parse([]byte("backends: [http://a:1]\n" + tc.yaml + "\n"))
		if err == nil || !strings.Contains(err.Error(), tc.key+`: "2.5" is not a valid integer`) {
			t.Errorf("%s: %v; want %s refused as not an integer", tc.yaml, err, tc.key)
		}
	}
}

// A float beyond an integer's range is refused naming the value written,
// not the -2^63 the decoder would turn it into.
func TestFloatBeyondIntegerRange(t *testing.T) {
	for _, tc := range []struct{ yaml, key, value string }{
		{"max_conns: 9223372036854775808.0", "max_conns", "9223372036854775808.0"},
		{"max_conns: 9.223372036854775807e18", "max_conns", "9.223372036854775807e18"},
		{"body: {max_bytes: -1e30}", "body.max_bytes", "-1e30"},
		{"tenants: {vip: {share: -.inf}}", "tenants.vip.share", "-.inf"},
		{"max_conns: 1e19", "max_conns", "1e19"}, // refused by the decoder
	} {
		_, err := config.Parse([]byte("backends: [http://a:1]\n" + tc.yaml + "\n"))
		if err == nil || strings.Count(err.Error(), tc.key+": ") != 1 || !strings.Contains(err.Error(), strconv.Quote(tc.value)+" is not a valid integer") {
			t.Errorf("%s: %v; want one error naming %s and %q as not an integer", tc.yaml, err, tc.key, tc.value)
		}
	}
}

// net/http adds its slack to max_header_bytes: a value near the largest
// int overflows there, and every request is answered 431. Such a value is
// refused, naming the key and the value; the largest accepted one serves.
func TestMaxHeaderBytesBounded(t *testing.T) {
	for _, v := range []string{"9223372036854775807", "9223372036854771712", "1073741825"} {
		_, err := config.Parse([]byte("backends: [http://a:1]\nmax_header_bytes: " + v + "\n"))
		if err == nil || !strings.Contains(err.Error(), "line 2: max_header_bytes: ") || !strings.Contains(err.Error(), v) {
			t.Errorf("max_header_bytes %s: %v; want an error naming the key and value", v, err)
		}
	}
	if _, err := config.Parse([]byte("backends: [http://a:1]\nmax_header_bytes: 1073741824\n")); err != nil {
		t.Errorf("max_header_bytes 1 GiB: %v", err)
	}
}

// With tenant.from host the key is the Host lower-cased, without a trailing
// dot, so a configured tenant with an upper-case letter or a trailing dot
// could never match a request: it is refused, naming the tenant and the key
// to write. Other sources keep their keys as they are.
func TestHostTenantsAreLowerCase(t *testing.T) {
	_, err := config.Parse([]byte("backends: [http://a:1]\ntenant: {from: host}\ntenants:\n  API.example.com: {share: 2}\n"))
	if err == nil || !strings.Contains(err.Error(), "line 4: tenants.API.example.com") || !strings.Contains(err.Error(), `"api.example.com"`) {
		t.Errorf("an upper-case host tenant: %v; want an error on line 4 naming it and its lower-case form", err)
	}
	_, err = config.Parse([]byte("backends: [http://a:1]\ntenant: {from: host}\ntenants:\n  api.example.com.: {share: 2}\n"))
	if err == nil || !strings.Contains(err.Error(), "line 4: tenants.api.example.com.") || !strings.Contains(err.Error(), `write "api.example.com"`) {
		t.Errorf("a host tenant with a trailing dot: %v; want an error on line 4 naming it and its form without the dot", err)
	}
	// An IP address is its canonical form, as the gateway reads it.
	_, err = config.Parse([]byte("backends: [http://a:1]\ntenant: {from: host}\ntenants:\n  \"2001:DB8:0::1\": {share: 2}\n"))
	if err == nil || !strings.Contains(err.Error(), "line 4: tenants.2001:DB8:0::1") || !strings.Contains(err.Error(), `write "2001:db8::1"`) {
		t.Errorf("a host tenant spelling an IPv6 address otherwise than canonically: %v; want an error on line 4 naming its canonical form", err)
	}
	// So is an IPv4 address however a resolver reads it, and a host
	// ending in a number that is no address can never match.
	_, err = config.Parse([]byte("backends: [http://a:1]\ntenant: {from: host}\ntenants:\n  \"127.1\": {share: 2}\n"))
	if err == nil || !strings.Contains(err.Error(), "line 4: tenants.127.1") || !strings.Contains(err.Error(), `write "127.0.0.1"`) {
		t.Errorf("a host tenant spelling an IPv4 address otherwise than as a dotted quad: %v; want an error on line 4 naming the dotted quad", err)
	}
	_, err = config.Parse([]byte("backends: [http://a:1]\ntenant: {from: host}\ntenants:\n  1.2.3.256: {share: 2}\n"))
	if err == nil || !strings.Contains(err.Error(), "line 4: tenants.1.2.3.256") || !strings.Contains(err.Error(), "IPv4") {
		t.Errorf("a host tenant ending in a number that is no address: %v; want an error on line 4 naming it", err)
	}
	// The gateway reads the Host without its port, and refuses one with
	// more colons that is no IPv6 address: a key with a colon that is no
	// address could never match.
	for _, key := range []string{"api.example.com:8080", "api.example.com:1:2", "a:b"} {
		_, err = config.Parse([]byte("backends: [http://a:1]\ntenant: {from: host}\ntenants:\n  \"" + key + "\": {share: 2}\n"))
		if err == nil || !strings.Contains(err.Error(), "line 4: tenants."+key) || !strings.Contains(err.Error(), "port") {
			t.Errorf("a host tenant %q with a colon that is no IPv6 address: %v; want an error on line 4 naming it and the port", key, err)
		}
	}
	for _, yaml := range []string{
		"tenant: {from: host}\ntenants: {api.example.com: {share: 2}}\n",
		"tenant: {from: host}\ntenants: {\"0::1\": {share: 2}, \"2001:db8::1\": {share: 2}, 127.0.0.1: {share: 2}}\n",
		"tenant: {from: header}\ntenants: {acme.: {share: 2}}\n",
		"tenant: {from: header}\ntenants: {Acme: {share: 2}}\n",
	} {
		if _, err := config.Parse([]byte("backends: [http://a:1]\n" + yaml)); err != nil {
			t.Errorf("%q: %v", yaml, err)
		}
	}
}

// refusedValues lists values an operator gets wrong, each with the one
// error it must get: its line, its key and the value whole.
var refusedValues = []struct {
	name, yaml, want string
}{
	// The decoder quotes a long value by its first 7 bytes: the error
	// still names the key that has it, in a flow mapping too, and the
	// value whole, and nothing else is said of the key.
	{"overflowing duration in a flow mapping", "timeouts: {read_header: 1s, read: 9999999999999h}",
		`line 2: timeouts.read: "9999999999999h" is not a valid duration`},
	{"overflowing duration", "drain_timeout: 100000000000h",
		`line 2: drain_timeout: "100000000000h" is not a valid duration`},
	{"overflowing limit in a flow mapping", "limits: {max_concurrency_per_group: 2, global_max_in_flight: 99999999999999999999}",
		`line 2: limits.global_max_in_flight: "99999999999999999999" is not a valid integer`},
	{"overflowing tenant limit", "tenants: {vip: {share: 2, max_in_flight: 99999999999999999999}}",
		`line 2: tenants.vip.max_in_flight: "99999999999999999999" is not a valid integer`},
	// A backend URL the proxy would dial elsewhere, never reach, or send
	// without a part of it.
	{"backend without a host name", `backends: ["http://:8081"]`,
		`line 1: backends: backend 1 ("http://:8081") has no host name`},
	{"backend port out of range", `backends: [http://a:1, "http://a:80800"]`,
		`line 1: backends: backend 2 ("http://a:80800"): port 80800 is not a port number (1 to 65535)`},
	{"backend port 0", `backends: ["http://a:0/"]`,
		`line 1: backends: backend 1 ("http://a:0/"): port 0 is not a port number (1 to 65535)`},
	{"backend with user info", `backends: ["http://user:secret@a:1"]`,
		`line 1: backends: backend 1 ("http://user:xxxxx@a:1") has user info`},
	{"backend with a fragment", `backends: ["http://a:1/#x"]`,
		`line 1: backends: backend 1 ("http://a:1/#x") has a fragment`},
	// A backend's breaker and its breaker_state series are named by its
	// URL: twice, the series collide and every scrape fails.
	{"backend listed twice", `backends: [http://a:1, http://b:1, http://a:1]`,
		`line 1: backends: backend 3 ("http://a:1") is backend 1 again`},
	// max_conns_per_client's default is derived from max_conns: a
	// negative max_conns is the one problem, not one of a key the file
	// does not have.
	{"negative max_conns", "max_conns: -8", `line 2: max_conns: -8 is negative`},
	{"negative admin_max_conns", "admin_max_conns: -1", `line 2: admin_max_conns: -1 is negative`},
	// A client's share of the connections cannot be more than the
	// whole: it would cap nothing max_conns does not.
	{"connections share over the total", "max_conns: 10\nmax_conns_per_client: 11",
		`line 3: max_conns_per_client: 11 is more than max_conns (10)`},
	{"connections share over the default total", "max_conns_per_client: 10001",
		`line 2: max_conns_per_client: 10001 is more than max_conns (10000)`},
	{"connections total under the share", "max_conns_per_client: 64\nmax_conns: 63",
		`line 2: max_conns_per_client: 64 is more than max_conns (63)`},
	// A client's share of the spool cannot be more than the whole; its
	// default, derived from a refused total, is no second problem.
	{"spool share over the total", "body: {spool_max_bytes: 100, spool_max_bytes_per_client: 101}",
		`line 2: body.spool_max_bytes_per_client: 101 is more than body.spool_max_bytes (100)`},
	{"spool share over the default total", "body: {spool_max_bytes_per_client: 1073741825}",
		`line 2: body.spool_max_bytes_per_client: 1073741825 is more than body.spool_max_bytes (1073741824)`},
	{"negative spool_max_bytes", "body: {spool_max_bytes: -1}", `line 2: body.spool_max_bytes: -1 is negative`},
	{"negative spool_max_bytes_per_client", "body: {spool_max_bytes_per_client: -1}",
		`line 2: body.spool_max_bytes_per_client: -1 is negative`},
	// An admin address whose port the proxy's already takes: refused at
	// load, not by the second listen.
	{"admin on the port listen takes on every address", "listen: \":8080\"\nadmin: 127.0.0.1:8080",
		`line 3: admin: "127.0.0.1:8080" must differ from listen (:8080)`},
	{"listen on the port admin takes on every address", "listen: 127.0.0.1:8080\nadmin: 0.0.0.0:8080",
		`line 3: admin: "0.0.0.0:8080" must differ from listen (127.0.0.1:8080)`},
	{"admin on the same port by its service name", "listen: \"[::]:80\"\nadmin: \"[::1]:http\"",
		`line 3: admin: "[::1]:http" must differ from listen ([::]:80)`},
	// One host written two ways: localhost is where Go listens on
	// 127.0.0.1 or ::1, and an IPv4-mapped address is its IPv4 one.
	{"admin on localhost, listen on 127.0.0.1", "listen: localhost:8087\nadmin: 127.0.0.1:8087",
		`line 3: admin: "127.0.0.1:8087" must differ from listen (localhost:8087)`},
	{"admin on ::1, listen on LOCALHOST.", "listen: LOCALHOST.:8087\nadmin: \"[::1]:8087\"",
		`line 3: admin: "[::1]:8087" must differ from listen (LOCALHOST.:8087)`},
	{"admin on an IPv4-mapped address", "listen: 10.0.0.1:8087\nadmin: \"[::ffff:10.0.0.1]:8087\"",
		`line 3: admin: "[::ffff:10.0.0.1]:8087" must differ from listen (10.0.0.1:8087)`},
	// An empty namespace is no prefix, which would put every metric
	// outside the namespace the docs put it under: refused, as a 0 is
	// where it means nothing.
	{"empty metrics namespace", `metrics: {namespace: ""}`,
		`line 2: metrics.namespace: "" is not a metric name prefix ([a-zA-Z_][a-zA-Z0-9_]*): leave the key out for its default`},
}

func TestRefusedValues(t *testing.T) {
	for _, tc := range refusedValues {
		t.Run(tc.name, func(t *testing.T) {
			yaml := tc.yaml + "\n"
			if !strings.HasPrefix(yaml, "backends:") {
				yaml = "backends: [http://a:1]\n" + yaml
			}
			_, err := config.Parse([]byte(yaml))
			if err == nil {
				t.Fatalf("accepted; want %s", tc.want)
			}
			if got := strings.Split(err.Error(), "\n"); len(got) != 1 || !strings.HasPrefix(got[0], "config: "+tc.want) {
				t.Errorf("got\n%v\nwant the one error\nconfig: %s", err, tc.want)
			}
		})
	}
}

// A backend URL's password is never in an error, whatever else is wrong
// with the URL: a refused reload is logged, and the log is no place for
// a credential.
func TestBackendPasswordNotInErrors(t *testing.T) {
	for _, b := range []string{
		"http://user:s3cret@a:1",
		"http://user:s3cret@a:80800",   // a bad port: url.Parse refuses it
		"http://user:s3cret@a b:1/x",   // a space in the host: refused too
		"http://user:s3cret@:1",        // no host name
		"http://user:s3cret@a:1/#frag", // a fragment too
		"http://user:s3c@ret@a:1?q",    // an @ in the password
		"ftp://user:s3cret@a:1",
		// A "/", "?" or "#" in the password, unescaped: url.Parse ends
		// the authority there, and refuses the port it then reads, or
		// (a password of digits first) takes the user name for the host.
		"http://user:s3c#ret@a:1",
		"http://user:s3c/ret@a:1",
		"http://user:s3c?ret@a:1",
		"http://user:1/s3c@a:1/#frag",
		"user:s3cret@a:1", // the scheme forgotten
	} {
		yaml := fmt.Sprintf("backends: [%q, %q]\n", b, b) // twice: listed again is an error too
		_, err := config.Parse([]byte(yaml))
		if err == nil {
			t.Errorf("%s: accepted", b)
			continue
		}
		if strings.Contains(err.Error(), "s3c") || !strings.Contains(err.Error(), "user:xxxxx@") {
			t.Errorf("%s: the errors show the password, or not the backend without it:\n%v", b, err)
		}
	}
}

// A password of digits up to an unescaped "/", "?" or "#" is read by
// url.Parse as the port of a host named by the user: the error about that
// port does not quote it.
func TestBackendPasswordNotInPortError(t *testing.T) {
	for _, b := range []string{
		"http://user:7654321/s3c@a:1",
		"http://user:7654321?s3c@a:1",
		"http://user:7654321#s3c@a:1",
	} {
		_, err := config.Parse([]byte(fmt.Sprintf("backends: [%q]\n", b)))
		if err == nil {
			t.Errorf("%s: accepted", b)
			continue
		}
		if strings.Contains(err.Error(), "7654321") || !strings.Contains(err.Error(), "user:xxxxx@") {
			t.Errorf("%s: the errors show the password, or not the backend without it:\n%v", b, err)
		}
	}
}

// A reload cannot give the listener another certificate or CA: new
// contents in the same files (a rotated certificate) need a restart, as new
// paths do.
func TestRestartOnlyTLSContents(t *testing.T) {
	dir := t.TempDir()
	f := sampleFiles(t, dir)
	yaml := []byte("backends: [http://a:1]\ntls: {cert_file: " + f["cert_file"] + ", key_file: " + f["key_file"] +
		", client_ca_file: " + f["client_ca_file"] + "}\n")
	old, err := config.Parse(yaml)
	if err != nil {
		t.Fatal(err)
	}
	same, err := config.Parse(yaml)
	if err != nil {
		t.Fatal(err)
	}
	if errs := same.RestartOnly(old); len(errs) != 0 {
		t.Fatalf("the same files: %v", errs)
	}
	sampleFiles(t, dir) // another key, certificate and CA, in the same files
	rotated, err := config.Parse(yaml)
	if err != nil {
		t.Fatal(err)
	}
	errs := rotated.RestartOnly(old)
	if len(errs) != 1 || errs[0].Key != "tls" || errs[0].Line != 2 || !strings.Contains(errs[0].Reason, "restart") {
		t.Fatalf("rotated files: %v; want one error on line 2's tls", config.JoinErrors(errs))
	}
}

// Addresses that take no port twice are accepted: another host's, another
// port, and port 0, which picks a free one each time.
func TestListenAdminOnDistinctSockets(t *testing.T) {
	for _, a := range [][2]string{
		{"127.0.0.1:8080", "10.0.0.1:8080"}, {":8080", ":9090"}, {":0", ":0"}, {"127.0.0.1:0", "127.0.0.1:0"},
		{"localhost:8080", "10.0.0.1:8080"}, {"localhost:8080", "127.0.0.2:8080"}, {"localhost:8080", "localhost:9090"},
		{"a.example:8080", "b.example:8080"},
	} {
		if _, err := config.Parse([]byte(fmt.Sprintf("backends: [http://a:1]\nlisten: %q\nadmin: %q\n", a[0], a[1]))); err != nil {
			t.Errorf("listen %s, admin %s: %v", a[0], a[1], err)
		}
	}
}

// An omitted burst is the rate rounded up: a rate too large for an int
// gets the largest burst, never the 1 that the conversion's overflow gave
// (a tenant allowed 1e30 requests a second could then send one at once).
func TestDefaultBurstOfAHugeRate(t *testing.T) {
	for _, tc := range []struct {
		rps  string
		want int
	}{{"0.5", 1}, {"2.5", 3}, {"3e9", min(3e9, math.MaxInt)}, {"1e30", math.MaxInt}} {
		c, err := config.Parse([]byte("backends: [http://a:1]\nrate_limit: {rps: " + tc.rps + "}\n"))
		if err != nil {
			t.Fatalf("rps %s: %v", tc.rps, err)
		}
		if c.RateLimit.Burst != tc.want {
			t.Errorf("rps %s: burst %d, want %d", tc.rps, c.RateLimit.Burst, tc.want)
		}
	}
}

// A mapping of more than config.MaxMappingKeys keys is refused before it
// is decoded, naming its key and line, but for the tenants mapping itself,
// unless it is anchored (an alias could have it decoded elsewhere): the
// decoder's check for a key given twice takes the square of a mapping's
// keys, and only tenants may have that many in a valid file.
func TestLargeMappingRefused(t *testing.T) {
	keys := func(n int, format string) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, format, i)
		}
		return b.String()
	}
	over := config.MaxMappingKeys + 1
	reason := func(n int) string {
		return fmt.Sprintf("a mapping of %d keys: none but tenants may have more than %d", n, config.MaxMappingKeys)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"top", "backends: [http://a:1]\n" + keys(over, "k%d: 1\n"), "config: line 1: " + reason(over+1)},
		{"limits", "backends: [http://a:1]\nlimits:\n" + keys(over, "  k%d: 1\n"), "config: line 2: limits: " + reason(over)},
		{"a tenant", "backends: [http://a:1]\ntenants:\n  a:\n" + keys(over, "    k%d: 1\n"), "config: line 3: tenants.a: " + reason(over)},
		{"anchored tenants", "backends: [http://a:1]\ntenants: &t\n" + keys(over, "  t%d: {}\n"), "config: line 2: tenants: " + reason(over)},
		{"tenants", "backends: [http://a:1]\ntenants:\n" + keys(over, "  t%d: {}\n"), ""},
	} {
		c, err := config.Parse([]byte(tc.yaml))
		switch {
		case tc.want == "" && (err != nil || len(c.Tenants) != over):
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
		}
	}
}

// The decoder leaves a mapping with a key given twice undecoded: the
// duplicate is reported, and the mapping's keys are not also reported as
// the zeros the decoder left (nor, for a duplicate at the top, the
// backends as missing). Problems elsewhere in the file still are.
func TestDuplicateKeyReportedAlone(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"backends: [http://a:1]\nmax_conns: 100\nlisten: 127.0.0.1:1\nlisten: 127.0.0.1:2\n",
			`config: line 4: listen: mapping key "listen" already defined at line 3`},
		{"backends: [http://a:1]\nmax_header_bytes: -1\ntimeouts: {read: 1s, write: 2s, read: 2s}\n",
			"config: line 2: max_header_bytes: -1 is negative\n" +
				`config: line 3: timeouts: mapping key "read" already defined at line 3`},
	} {
		_, err := config.Parse([]byte(tc.yaml))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q:\n%v\nwant\n%s", tc.yaml, err, tc.want)
		}
	}
}

// body.spool_dir is checked when the config is parsed, as the files a
// config names are: a directory that is not there would fail every body
// over buffer_bytes with 500 spool_failed, long after the config was
// taken.
func TestSpoolDirChecked(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ dir, want string }{
		{filepath.Join(dir, "missing"), fmt.Sprintf("config: line 2: body.spool_dir: %q: no such file or directory", filepath.Join(dir, "missing"))},
		{file, fmt.Sprintf("config: line 2: body.spool_dir: %q is not a directory", file)},
	} {
		_, err := config.Parse(fmt.Appendf(nil, "backends: [http://a:1]\nbody: {spool_dir: %q}\n", tc.dir))
		if err == nil || err.Error() != tc.want {
			t.Errorf("spool_dir %s: %v; want %s", tc.dir, err, tc.want)
		}
	}
	if _, err := config.Parse(fmt.Appendf(nil, "backends: [http://a:1]\nbody: {spool_dir: %q}\n", dir)); err != nil {
		t.Errorf("spool_dir %s, a directory: %v", dir, err)
	}
}

// tenant.require with tenant.default set is refused, naming both keys: the
// default tenant would never serve a request. Either alone is accepted, and
// require leaves the default group its default name.
func TestTenantRequireWithDefault(t *testing.T) {
	_, err := config.Parse([]byte("backends: [http://a:1]\ntenant:\n  require: true\n  default: guests\n"))
	if err == nil || !strings.Contains(err.Error(), "line 4: tenant.default") || !strings.Contains(err.Error(), "tenant.require") {
		t.Errorf("require with default: %v, want an error at line 4 naming tenant.default and tenant.require", err)
	}
	c, err := config.Parse([]byte("backends: [http://a:1]\ntenant: {require: true}\n"))
	if err != nil || !c.Tenant.Require || c.Tenant.Default != config.DefaultTenant {
		t.Errorf("require alone: %v, %+v", err, c)
	}
	for _, keys := range []string{"tenant: {default: guests}", "tenant: {require: false, default: guests}"} {
		if c, err := config.Parse([]byte("backends: [http://a:1]\n" + keys + "\n")); err != nil || c.Tenant.Require {
			t.Errorf("%s: %v", keys, err)
		}
	}
}

// A key set through an alias (*name) or a merge (<<: *name) is set: it
// keeps its value, which an omitted key's default must not replace, and a
// 0 where 0 means nothing is refused at the line that uses it.
func TestAliasedKeysAreSet(t *testing.T) {
	for _, tc := range []struct{ name, yaml string }{
		{"alias", "tenants:\n  acme: &std {share: 2, rate_limit: {rps: 10, burst: 50}}\n  globex: *std\n"},
		{"merge", "tenants:\n  acme: &std {share: 2, rate_limit: {rps: 10, burst: 50}}\n  globex: {<<: *std}\n"},
		{"merge of a list", "tenants:\n  acme: &std {share: 2, rate_limit: {rps: 10, burst: 50}}\n  globex: {<<: [{max_concurrency: 3}, *std]}\n"},
		{"nested alias", "rate_limit: &r {rps: 10, burst: 50}\ntenants:\n  acme: {share: 2, rate_limit: *r}\n  globex: {share: 2, rate_limit: *r}\n"},
	} {
		c, err := config.Parse([]byte("backends: [http://a:1]\n" + tc.yaml))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, name := range []string{"acme", "globex"} {
			if rl := c.Tenants[name].RateLimit; rl == nil || rl.Burst != 50 || *c.Tenants[name].Share != 2 {
				t.Errorf("%s: tenant %s has rate %+v, want burst 50 as set", tc.name, name, rl)
			}
		}
	}
	_, err := config.Parse([]byte("backends: [http://a:1]\ntenants:\n  acme: &std {rate_limit: {rps: 10, burst: 0}}\n  globex: {<<: *std}\n"))
	want := "config: line 3: tenants.acme.rate_limit.burst: 0 is not a valid value here: leave the key out for its default\n" +
		"config: line 4: tenants.globex.rate_limit.burst: 0 is not a valid value here: leave the key out for its default"
	if err == nil || err.Error() != want {
		t.Errorf("a burst of 0 through a merge: %v\nwant\n%s", err, want)
	}
}

// A merge is shallow: a key written beside it (before or after it) is the
// one in force, with all its value holds, and so is the first of a list of
// merged mappings to have it. The keys the merged mapping has under it are
// not set: their defaults apply, a value there is neither refused nor
// checked, and a refusal of the key in force names its own line.
func TestKeyBesideAMergeHidesTheMergedOne(t *testing.T) {
	const std = "tenants:\n  acme: &std {share: 2, rate_limit: {rps: 10, burst: 50}}\n"
	for _, tc := range []struct{ name, yaml string }{
		{"after", std + "  globex:\n    <<: *std\n    rate_limit: {rps: 5}\n"},
		{"before", std + "  globex:\n    rate_limit: {rps: 5}\n    <<: *std\n"},
		{"listed first", std + "  globex: {<<: [{rate_limit: {rps: 5}}, *std]}\n"},
		{"a fraction hidden", std + "  globex: {<<: [{share: 2.5}, *std], share: 2, rate_limit: {rps: 5}}\n"},
	} {
		c, err := config.Parse([]byte("backends: [http://a:1]\n" + tc.yaml))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		g := c.Tenants["globex"]
		if rl := g.RateLimit; rl == nil || rl.RPS != 5 || rl.Burst != 5 {
			t.Errorf("%s: globex's rate %+v, want rps 5 and the default burst, 5", tc.name, rl)
		}
		if g.Share == nil || *g.Share != 2 {
			t.Errorf("%s: globex's share %v, want 2", tc.name, g.Share)
		}
	}
	_, err := config.Parse([]byte("backends: [http://a:1]\ntenants:\n  acme: &std\n    max_in_flight: x\n" +
		"  globex:\n    <<: *std\n    max_in_flight: -3\n"))
	want := "config: line 4: tenants.acme.max_in_flight: \"x\" is not a valid integer\n" +
		"config: line 7: tenants.globex.max_in_flight: -3 is invalid: a limit must be >= 1 (policy.Unlimited for none)"
	if err == nil || err.Error() != want {
		t.Errorf("a key beside a merge of a refused one:\n%v\nwant\n%s", err, want)
	}
}

// A restart-only limit written out with the value it had when left out
// (policy's default) is no change: the reload that adds or drops it is
// not refused. Another value still is.
func TestRestartOnlyComparesValuesInForce(t *testing.T) {
	parse := func(limits string) *config.Config {
		t.Helper()
		c, err := config.Parse([]byte("backends: [http://a:1]\n" + limits))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	omitted := parse("")
	explicit := parse(fmt.Sprintf("limits: {queue_timeout: 0s, global_queue_threshold: %d}\n", math.MaxInt))
	if errs := explicit.RestartOnly(omitted); len(errs) != 0 {
		t.Errorf("defaults written out: %v", config.JoinErrors(errs))
	}
	if errs := omitted.RestartOnly(explicit); len(errs) != 0 {
		t.Errorf("defaults left out: %v", config.JoinErrors(errs))
	}
	changed := parse("limits: {queue_timeout: 1s, global_queue_threshold: 10}\n")
	if errs := changed.RestartOnly(omitted); len(errs) != 2 {
		t.Errorf("both changed: %v; want two errors", config.JoinErrors(errs))
	}
}

// Breakers disabled before and after a reload are none to keep: where they
// would be kept (breaker.per) and the per-tenant settings can change. A
// reload that enables or disables them is refused, naming breaker.enabled
// and the other keys it changes.
func TestRestartOnlyDisabledBreakers(t *testing.T) {
	parse := func(breaker string) *config.Config {
		t.Helper()
		c, err := config.Parse([]byte("backends: [http://a:1]\nbreaker: " + breaker + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	offBackend := parse("{enabled: false}")
	offTenant := parse("{enabled: false, per: tenant, consecutive_failures: 3, timeout: 1s, max_requests: 2}")
	offTenant2 := parse("{enabled: false, per: tenant, consecutive_failures: 9, timeout: 1m, max_requests: 5}")
	onTenant := parse("{per: tenant, consecutive_failures: 9, timeout: 1m, max_requests: 5}")
	for _, tc := range []struct {
		name     string
		from, to *config.Config
		want     []string
	}{
		{"disabled, backend to tenant", offBackend, offTenant, nil},
		{"disabled, tenant to backend", offTenant, offBackend, nil},
		{"disabled, tenant settings", offTenant, offTenant2, nil},
		{"disabled to enabled", offBackend, onTenant, []string{"breaker.enabled", "breaker.per"}},
		{"enabled to disabled", onTenant, offBackend, []string{"breaker.enabled", "breaker.per"}},
		{"disabled to enabled, tenant settings", offTenant, onTenant, []string{"breaker.enabled",
			"breaker.consecutive_failures", "breaker.timeout", "breaker.max_requests"}},
	} {
		var got []string
		for _, e := range tc.to.RestartOnly(tc.from) {
			got = append(got, e.Key)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: refused %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A value an alias repeats is refused once, where it is written, and the
// keys the aliases bring in are not reported as the zeros the decoder
// left them: the file has no such values.
func TestAliasedErrorReportedOnce(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"tenants:\n  a: &x\n    share: abc\n  c: {shar: 1}\n  b: *x\n",
			"config: line 4: tenants.a.share: \"abc\" is not a valid integer\n" +
				"config: line 5: tenants.c.shar: unknown key: did you mean share?"},
		{"tenants:\n  a: &x\n    rate_limit: {rps: 1, burst: 1x}\n  b: {<<: *x, share: 2}\n",
			"config: line 4: tenants.a.rate_limit.burst: \"1x\" is not a valid integer"},
	} {
		_, err := config.Parse([]byte("backends: [http://a:1]\n" + tc.yaml))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q:\n%v\nwant\n%s", tc.yaml, err, tc.want)
		}
	}
}

// A null mapping key (null, ~) is refused, naming its line: the decoder
// would drop it and its value without a word, so that a tenant named so
// would get no limits of its own and an unknown key would pass.
func TestNullKeyRefused(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"tenants:\n  null: {share: 2}\n", `config: line 3: tenants.null: "null" is a null key, which names nothing: quote it to use it as a name`},
		{"~: 5\n", `config: line 2: ~: "~" is a null key, which names nothing: quote it to use it as a name`},
		{"limits: {Null: 5}\n", `config: line 2: limits.Null: "Null" is a null key, which names nothing: quote it to use it as a name`},
	} {
		_, err := config.Parse([]byte("backends: [http://a:1]\n" + tc.yaml))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: %v; want %s", tc.yaml, err, tc.want)
		}
	}
	c, err := config.Parse([]byte("backends: [http://a:1]\ntenants:\n  \"null\": {share: 2}\n"))
	if err != nil || c.Tenants["null"].Share == nil {
		t.Errorf("a quoted null key: %v, %+v", err, c)
	}
}

// A null list item (nothing after its dash, ~, null) is refused, naming
// the list and the item's line: the decoder drops it without a word, so
// that a trusted_proxies list whose one address was left out (a template
// filled with nothing) trusted every address, as an empty list does, and a
// backend written so was never proxied to.
func TestNullListItemRefused(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"tenant:\n  trusted_proxies:\n    -\n",
			`config: line 4: tenant.trusted_proxies: item 1 is null (nothing), which names nothing: remove it or give it a value`},
		{"tenant: {trusted_proxies: [10.0.0.1, ~]}\n",
			`config: line 2: tenant.trusted_proxies: item 2 is null (~), which names nothing: remove it or give it a value`},
		{"backends:\n  - http://a:1\n  - null\n",
			`config: line 3: backends: item 2 is null (null), which names nothing: remove it or give it a value`},
	} {
		yaml := tc.yaml
		if !strings.HasPrefix(yaml, "backends:") {
			yaml = "backends: [http://a:1]\n" + yaml
		}
		_, err := config.Parse([]byte(yaml))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: %v; want %s", tc.yaml, err, tc.want)
		}
	}
	// Quoted, it is the empty string, refused as the value it is.
	_, err := config.Parse([]byte("backends: [http://a:1]\ntenant: {trusted_proxies: [\"~\"]}\n"))
	if err == nil || !strings.Contains(err.Error(), `line 2: tenant.trusted_proxies: "~" is not a CIDR or an address`) {
		t.Errorf("a quoted ~: %v", err)
	}
}

// A value of the wrong type is refused naming its key and the key's line,
// wherever the value starts: a block value on the line after its key, an
// alias's where it is anchored. Nothing else is reported of the key: not
// the zero the decoder left it, nor a key its value contains.
func TestWrongTypeNamesItsKey(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"backends: [http://a:1]\ntenants:\n  - a\n", "config: line 2: tenants: a list is not a valid mapping"},
		{"backends:\n  x: 1\n", "config: line 1: backends: a mapping is not a valid list"},
		{"backends: [http://a:1]\nlisten:\n  - a\n", "config: line 2: listen: a list is not a valid string"},
		{"backends: [http://a:1]\ntimeouts:\n  read:\n    - 1s\n",
			"config: line 3: timeouts.read: a list is not a valid duration (e.g. 2s, 500ms)"},
		{"backends: &b [http://a:1]\nlisten: *b\n", "config: line 2: listen: a list is not a valid string"},
		{"backends: [http://a:1]\ntenants: {a: [x], b: {share: y}}\n",
			"config: line 2: tenants.a: a list is not a valid mapping\n" +
				`config: line 2: tenants.b.share: "y" is not a valid integer`},
	} {
		_, err := config.Parse([]byte(tc.yaml))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q:\n%v\nwant\n%s", tc.yaml, err, tc.want)
		}
	}
}

// Every number and duration of the file, given a negative value, is
// refused at load with an error on its line naming the key and the value,
// as duplicate tenants are (the second naming the first).
func TestNegativeValuesNameKeyAndValue(t *testing.T) {
	for _, tc := range []struct{ yaml, key, value string }{
		{"max_conns: -1", "max_conns", "-1"},
		{"max_conns_per_client: -1", "max_conns_per_client", "-1"},
		{"admin_max_conns: -1", "admin_max_conns", "-1"},
		{"http2_max_streams: -1", "http2_max_streams", "-1"},
		{"max_header_bytes: -1", "max_header_bytes", "-1"},
		{"drain_delay: -1s", "drain_delay", "-1s"},
		{"drain_timeout: -1s", "drain_timeout", "-1s"},
		{"tenant: {max_groups: -1}", "tenant.max_groups", "-1"},
		{"tenant: {bearer: {leeway: -1s}}", "tenant.bearer.leeway", "-1s"},
		{"limits: {global_max_in_flight: -1}", "limits.global_max_in_flight", "-1"},
		{"limits: {max_in_flight_per_group: -1}", "limits.max_in_flight_per_group", "-1"},
		{"limits: {max_concurrency_per_group: -1}", "limits.max_concurrency_per_group", "-1"},
		{"limits: {queue_threshold_per_group: -1}", "limits.queue_threshold_per_group", "-1"},
		{"limits: {global_queue_threshold: -1}", "limits.global_queue_threshold", "-1"},
		{"limits: {queue_timeout: -1s}", "limits.queue_timeout", "-1s"},
		{"rate_limit: {rps: -1}", "rate_limit.rps", "-1"},
		{"rate_limit: {rps: 1, burst: -1}", "rate_limit.burst", "-1"},
		{"tenants: {vip: {max_concurrency: -1}}", "tenants.vip.max_concurrency", "-1"},
		{"tenants: {vip: {max_in_flight: -1}}", "tenants.vip.max_in_flight", "-1"},
		{"tenants: {vip: {queue_threshold: -1}}", "tenants.vip.queue_threshold", "-1"},
		{"tenants: {vip: {share: -1}}", "tenants.vip.share", "-1"},
		{"tenants: {vip: {rate_limit: {rps: -1}}}", "tenants.vip.rate_limit.rps", "-1"},
		{"tenants: {vip: {rate_limit: {rps: 1, burst: -1}}}", "tenants.vip.rate_limit.burst", "-1"},
		{"breaker: {consecutive_failures: -1}", "breaker.consecutive_failures", "-1"},
		{"breaker: {timeout: -1s}", "breaker.timeout", "-1s"},
		{"breaker: {max_timeout: -1s}", "breaker.max_timeout", "-1s"},
		{"breaker: {max_requests: -1}", "breaker.max_requests", "-1"},
		{"timeouts: {read_header: -1s}", "timeouts.read_header", "-1s"},
		{"timeouts: {read: -1s}", "timeouts.read", "-1s"},
		{"timeouts: {write: -1s}", "timeouts.write", "-1s"},
		{"timeouts: {idle: -1s}", "timeouts.idle", "-1s"},
		{"timeouts: {upstream: -1s}", "timeouts.upstream", "-1s"},
		{"body: {max_bytes: -1}", "body.max_bytes", "-1"},
		{"body: {max_decoded_bytes: -1}", "body.max_decoded_bytes", "-1"},
		{"body: {max_ratio: -1}", "body.max_ratio", "-1"},
		{"body: {buffer_bytes: -1}", "body.buffer_bytes", "-1"},
		{"body: {spool_max_bytes: -1}", "body.spool_max_bytes", "-1"},
		{"body: {spool_max_bytes_per_client: -1}", "body.spool_max_bytes_per_client", "-1"},
		{"response: {buffer_bytes: -1}", "response.buffer_bytes", "-1"},
		{"tenants:\n  vip: {share: 2}\n  vip: {share: 3}", "tenants.vip", `"vip" already defined at line 3`},
	} {
		_, err := config.Parse([]byte("backends: [http://a:1]\n" + tc.yaml + "\n"))
		if err == nil {
			t.Errorf("%q: accepted", tc.yaml)
			continue
		}
		if msg := err.Error(); strings.Count(msg, "\n") != 0 || !strings.Contains(msg, ": "+tc.key+": ") || !strings.Contains(msg, tc.value) {
			t.Errorf("%q: %v; want one error naming %s and %s", tc.yaml, err, tc.key, tc.value)
		}
	}
}
