package httpadmit_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
)

// Every host net/http can send to has a destination group: a DNS name of
// more than MaxTenantLen bytes (names go up to 253) and an
// internationalized one are sent, each in its own group.
func TestTransportSendsToEveryHost(t *testing.T) {
	ex := newExec(t, nil)
	base := roundTripper(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
	})
	rt := httpadmit.Transport(ex, base)
	long := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + ".example"
	for _, u := range []string{"https://" + long + "/", "http://bücher.example/"} {
		req, err := http.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Errorf("%s: %v", u, err)
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// Each spelling of one destination is one group, with one bulkhead: a
// host's trailing dot, an IPv6 address's other forms, an IPv4-mapped
// address and an internationalized name's Unicode spellings (in either
// case, with an ideographic full stop) and its Punycode one reach the host
// that its plain spelling does, and would otherwise each have the
// destination's limits again.
func TestTransportGroupsEverySpellingOfAHost(t *testing.T) {
	ex := newExec(t, nil)
	var group string
	base := groupOf(&group)
	rt := httpadmit.Transport(ex, base)
	for want, urls := range map[string][]string{
		"api.example:80":  {"http://api.example/", "http://API.Example:80/", "http://api.example./", "http://api.example.:80/"},
		"api.example:443": {"https://api.example/", "https://api.example./"},
		"[::1]:8080":      {"http://[::1]:8080/", "http://[0:0::1]:8080/", "http://[0000:0000:0000:0000:0000:0000:0000:0001]:8080/"},
		"127.0.0.1:8080":  {"http://127.0.0.1:8080/", "http://[::ffff:127.0.0.1]:8080/", "http://[::FFFF:7f00:1]:8080/"},
		"xn--bcher-kva.example:443": {
			"https://xn--bcher-kva.example/", "https://XN--BCHER-KVA.Example./", "https://bücher.example/",
			"https://BÜCHER.example/", "https://bücher.example./", "https://bücher。example/", "https://bücher.example。/",
		},
	} {
		for _, u := range urls {
			req, err := http.NewRequest(http.MethodGet, u, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := rt.RoundTrip(req); err != nil {
				t.Fatalf("%s: %v", u, err)
			}
			if group != want {
				t.Errorf("%s: group %q, want %q", u, group, want)
			}
		}
	}
}

// A Transport that groups by the outgoing request's Host (WithTenantHost)
// sends to an internationalized host, which net/http sends in its ASCII
// form, in the group of that form, however it is spelled: the Unicode
// name, which no tenant key may be, refused the request as an invalid
// tenant.
func TestTransportTenantHostOfAnInternationalizedHost(t *testing.T) {
	ex := newExec(t, nil)
	var group string
	base := groupOf(&group)
	rt := httpadmit.Transport(ex, base, httpadmit.WithTenantHost())
	for _, u := range []string{"http://bücher.example/", "https://BÜCHER.example:8443/", "http://bücher。example./", "http://xn--bcher-kva.example/"} {
		req, err := http.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		group = ""
		if _, err := rt.RoundTrip(req); err != nil {
			t.Errorf("%s: %v", u, err)
			continue
		}
		if group != "xn--bcher-kva.example" {
			t.Errorf("%s: group %q, want %q", u, group, "xn--bcher-kva.example")
		}
	}
}

// A host too long to be a DNS name (a label of more than 63 characters, or
// more than 253 in all: each takes at least one character of the ASCII
// form) is grouped as it is spelled, lower-cased, not mapped to its ASCII
// form: idna's Punycode takes time in the square of a label's length, and
// a client's HTTP/2 request (whose Host net/http does not hold to ASCII)
// with a Host of 48 KB in one label of distinct characters took seconds of
// WithTenantHost's time. Such a host resolves to nothing. A label of 63
// characters is still mapped.
func TestTransportLeavesAHostTooLongForDNSUnmapped(t *testing.T) {
	ex := newExec(t, nil)
	var group string
	base := groupOf(&group)
	rt := httpadmit.Transport(ex, base)
	distinct := func(n int) string { // n distinct characters, no two alike
		var b strings.Builder
		for i := range n {
			b.WriteRune(rune(0x4E00 + i))
		}
		return b.String()
	}
	for _, tc := range []struct {
		host   string
		mapped bool
	}{
		{distinct(63) + ".example", true},
		{distinct(64) + ".example", false},
		{strings.Repeat("Ü.", 126) + "Ü", true},  // 253 characters in all
		{strings.Repeat("Ü.", 127), false},       // 254
		{strings.Repeat("ü。", 127), false},       // 254, an ideographic full stop a dot
		{"x" + distinct(63) + "。example", false}, // 64 in its first label
	} {
		req, err := http.NewRequest(http.MethodGet, "http://"+tc.host+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		group = ""
		if _, err := rt.RoundTrip(req); err != nil {
			t.Fatalf("%.40s...: %v", tc.host, err)
		}
		want := strings.ToLower(strings.TrimRight(tc.host, ".")) + ":80"
		if got := strings.HasPrefix(group, "xn--"); got != tc.mapped || !tc.mapped && group != want {
			t.Errorf("%d characters (%.40s...): group %.60q..., mapped %v, want mapped %v", len([]rune(tc.host)), tc.host, group, got, tc.mapped)
		}
	}
}

// groupOf returns a base transport that answers 200 and records in *group
// the group its request was admitted in.
func groupOf(group *string) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		*group, _ = executor.GroupFromContext(r.Context())
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
	})
}
