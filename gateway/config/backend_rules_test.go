package config_test

import (
	"strings"
	"testing"

	"github.com/groupexec/groupexec/gateway/config"
)

// One backend written two ways is refused as a backend listed twice is,
// naming both spellings and their lines: the gateway keys a backend's
// breaker, and its breaker_state series, by the URL as written, so that
// "http://a:1" and "http://a:1/" were two backends with two breakers, the
// backend taking twice its share of requests and staying in rotation
// through its twin's breaker while its own was open. Two URLs are one
// backend where the proxy sends the same request to the same origin:
// scheme and host in any case, an IP address in any spelling, the
// scheme's default port written or not, an empty path or "/", a path with
// or without its trailing slash (the request's path is joined to it with
// one slash either way), an empty query or none.
func TestBackendSpelledTwiceRefused(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{`backends: [http://a:1, "http://a:1/"]`,
			`line 1: backends: backend 2 ("http://a:1/") is backend 1 ("http://a:1", line 1) again, written otherwise: list each backend once`},
		{"backends:\n  - http://a:80\n  - http://b:1\n  - HTTP://A/\n",
			`line 4: backends: backend 3 ("HTTP://A/") is backend 1 ("http://a:80", line 2) again, written otherwise`},
		{"backends:\n  - https://a\n  - https://a:443/", `line 3: backends: backend 2 ("https://a:443/") is backend 1 ("https://a", line 2) again`},
		{`backends: ["http://[::1]:8080", "http://[0:0::1]:8080/"]`, `line 1: backends: backend 2 ("http://[0:0::1]:8080/") is backend 1`},
		{`backends: ["http://[::ffff:10.0.0.1]:8080", "http://10.0.0.1:8080"]`, `line 1: backends: backend 2 ("http://10.0.0.1:8080") is backend 1`},
		{`backends: [http://a/p, http://A/p/]`, `line 1: backends: backend 2 ("http://A/p/") is backend 1 ("http://a/p", line 1) again`},
		{`backends: ["http://a/p?x=1", "http://a:80/p/?x=1"]`, `line 1: backends: backend 2 ("http://a:80/p/?x=1") is backend 1`},
		{`backends: ["http://a:1?", "http://a:1"]`, `line 1: backends: backend 2 ("http://a:1") is backend 1`},
		// Listed twice as written, it is named as before.
		{`backends: [http://a:1, http://a:1]`, `line 1: backends: backend 2 ("http://a:1") is backend 1 again: list each backend once`},
	} {
		_, err := config.Parse([]byte(tc.yaml + "\n"))
		if err == nil || !strings.HasPrefix(err.Error(), "config: "+tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v; want the one error config: %s...", tc.yaml, err, tc.want)
		}
	}
	// Not one backend: another scheme, port, path, query or host; a
	// path's case or its double slash, which the backend is sent; a host
	// with and without its trailing dot, which a resolver with search
	// domains may take for two hosts.
	for _, pair := range [][2]string{
		{"http://a:1", "https://a:1"}, {"http://a", "http://a:8080"}, {"http://a/p", "http://a/P"},
		{"http://a/p", "http://a/p//"}, {"http://a/?x=1", "http://a/?x=2"}, {"http://a", "http://a."},
		{"http://a", "http://b"}, {"http://a/p", "http://a/"},
	} {
		if _, err := config.Parse([]byte("backends: [\"" + pair[0] + "\", \"" + pair[1] + "\"]\n")); err != nil {
			t.Errorf("%s and %s: %v", pair[0], pair[1], err)
		}
	}
	// Neither spelling shows a password.
	_, err := config.Parse([]byte(`backends: ["http://u:s3cret@a:1", "http://u:s3cret@A:1/"]` + "\n"))
	if err == nil || strings.Contains(err.Error(), "s3c") || !strings.Contains(err.Error(), `backend 2 ("http://u:xxxxx@A:1/") is backend 1 ("http://u:xxxxx@a:1", line 1) again`) {
		t.Errorf("a backend with a password written twice: %v", err)
	}
}
