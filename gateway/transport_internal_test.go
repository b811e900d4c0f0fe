package gateway

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// recordingRT fails the first fail tries, then answers 200; it keeps a copy
// of what each try asked for.
type recordingRT struct {
	fail int
	seen []*http.Request
}

func (r *recordingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	r.seen = append(r.seen, req)
	if len(r.seen) <= r.fail {
		return nil, errors.New("connection reset")
	}
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("ok")), Request: req}, nil
}

// The transport sends each try to its backend without changing the request
// it was given (the RoundTripper contract), although it no longer deep-copies
// it: each try has its own URL, pointed at the backend, and the same headers.
func TestTransportLeavesRequestAlone(t *testing.T) {
	b1, _ := url.Parse("http://10.0.0.1:8081/base")
	b2, _ := url.Parse("http://10.0.0.2:8082")
	rt := &recordingRT{fail: 1}
	st := &state{backends: []*url.URL{b1, b2}}
	tr := &transport{base: rt, state: func() *state { return st }, retried: func() {}}
	req, _ := http.NewRequest(http.MethodGet, "http://gateway.example/path?q=1", nil)
	req.Header.Set("X-Tenant", "acme")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	if got := req.URL.String(); got != "http://gateway.example/path?q=1" || req.Host != "gateway.example" {
		t.Errorf("the request was changed: URL %s Host %q", got, req.Host)
	}
	if len(req.Header) != 1 || req.Header.Get("X-Tenant") != "acme" {
		t.Errorf("the request's headers were changed: %v", req.Header)
	}
	if len(rt.seen) != 2 {
		t.Fatalf("%d tries, want 2 (one retry after the reset)", len(rt.seen))
	}
	// tr.next starts at 0 and is incremented first: the first try goes to
	// backends[1], the retry to backends[0].
	want := []string{"http://10.0.0.2:8082/path?q=1", "http://10.0.0.1:8081/base/path?q=1"}
	for i, out := range rt.seen {
		if out == req || out.URL == req.URL {
			t.Errorf("try %d shares the request or its URL", i)
		}
		if got := out.URL.String(); got != want[i] {
			t.Errorf("try %d went to %s, want %s", i, got, want[i])
		}
		if out.Host != "" || out.Header.Get("X-Tenant") != "acme" || out.Context() != req.Context() {
			t.Errorf("try %d: Host %q, headers %v", i, out.Host, out.Header)
		}
	}
	if rt.seen[0].URL == rt.seen[1].URL {
		t.Error("the tries share a URL")
	}
}

// A request is retried only if the method the backend runs is idempotent:
// its own, and the one a method override (a header, or a _method query
// parameter) asks for. A GET overridden to POST has the backend run a POST,
// which a retry would run twice.
func TestRetryJudgesMethodOverride(t *testing.T) {
	b, _ := url.Parse("http://10.0.0.1:8081")
	st := &state{backends: []*url.URL{b}}
	for _, tc := range []struct {
		target, header, value string
		tries                 int
	}{
		{"/x", "X-HTTP-Method-Override", "POST", 1},
		{"/x", "X-Http-Method", "patch", 1},
		{"/x", "X_Method_Override", "POST", 1},
		{"/x?_method=POST", "", "", 1},
		{"/x?.method=post", "", "", 1},
		{"/x", "X-HTTP-Method-Override", "delete", 2},
		{"/x?_method=PUT", "", "", 2},
		{"/x?method=POST", "", "", 2},
	} {
		rt := &recordingRT{fail: 1}
		tr := &transport{base: rt, state: func() *state { return st }, retried: func() {}}
		req, _ := http.NewRequest(http.MethodGet, "http://gateway.example"+tc.target, nil)
		if tc.header != "" {
			req.Header[tc.header] = []string{tc.value}
		}
		if resp, err := tr.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
		if len(rt.seen) != tc.tries {
			t.Errorf("GET %s, %s: %s: %d tries, want %d", tc.target, tc.header, tc.value, len(rt.seen), tc.tries)
		}
	}
}
