package httpadmit_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/httpadmit"
)

// A tenant or weight function that cannot read the request through no fault
// of the request's (the lookup it needs is down) says so with
// ErrUnavailable: the server failed, so the client is answered 503 with
// Retry-After, as for the server's other transient failures, and not 400,
// which tells it never to send the request again. The function's text,
// the server's internals, stays out of the answer. Any other error of the
// function's is still the request's fault, 400.
func TestFunctionUnavailableIs503(t *testing.T) {
	lookup := errors.New("dial 10.0.0.7:5432: connection refused")
	unavailable := func(*http.Request) (string, error) {
		return "", fmt.Errorf("accounts: %w: %w", httpadmit.ErrUnavailable, lookup)
	}
	weightUnavailable := func(*http.Request) (int, error) {
		return 0, fmt.Errorf("%w: %w", httpadmit.ErrUnavailable, lookup)
	}
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for _, tc := range []struct {
		name string
		opts []httpadmit.Option
		code int
	}{
		{"tenant", []httpadmit.Option{httpadmit.WithTenantFunc(unavailable)}, http.StatusServiceUnavailable},
		{"weight", []httpadmit.Option{httpadmit.WithWeightFunc(weightUnavailable)}, http.StatusServiceUnavailable},
		{"tenant invalid", []httpadmit.Option{httpadmit.WithTenantFunc(func(*http.Request) (string, error) {
			return "", errors.New("no such account")
		})}, http.StatusBadRequest},
	} {
		ex := newExec(t, nil)
		srv := serve(t, httpadmit.Handler(ex, ok, tc.opts...))
		code, ra, body := mustGet(t, srv.URL, "")
		if code != tc.code {
			t.Errorf("%s: %d %q, want %d", tc.name, code, body, tc.code)
		}
		if tc.code == http.StatusServiceUnavailable && (ra != "1" || strings.Contains(body, "10.0.0.7")) {
			t.Errorf("%s: Retry-After %q, body %q; want 1, and no internal detail", tc.name, ra, body)
		}
	}

	// A refusal writer sees the function's error, which is no invalid
	// tenant: one testing for ErrInvalidTenant first does not answer 400.
	seen := make(chan error, 1)
	ex := newExec(t, nil)
	srv := serve(t, httpadmit.Handler(ex, ok, httpadmit.WithTenantFunc(unavailable),
		httpadmit.WithRefusalWriter(func(w http.ResponseWriter, _ *http.Request, err error) {
			seen <- err
			w.WriteHeader(httpadmit.RefusalStatus(err))
		})))
	if code, _, _ := mustGet(t, srv.URL, ""); code != http.StatusServiceUnavailable {
		t.Errorf("refusal writer: %d, want RefusalStatus's 503", code)
	}
	err := <-seen
	if !errors.Is(err, httpadmit.ErrUnavailable) || !errors.Is(err, lookup) || errors.Is(err, httpadmit.ErrInvalidTenant) {
		t.Errorf("refusal writer's error %v: want the function's, matching ErrUnavailable and not ErrInvalidTenant", err)
	}
}
