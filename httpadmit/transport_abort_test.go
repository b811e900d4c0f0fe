package httpadmit_test

import (
	"net/http"
	"testing"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
)

// A base that panics with http.ErrAbortHandler (an in-process transport
// whose handler gave the response up) is a deliberate abort, as in Handler:
// the panic reaches RoundTrip's caller unchanged, and the request counts as
// Cancelled, not as a failure of the host.
func TestTransportBaseAbortIsCancelled(t *testing.T) {
	ex := newExec(t, nil, executor.WithGroupBreaker(breaker.Settings{
		ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
	}))
	base := roundTripper(func(*http.Request) (*http.Response, error) { panic(http.ErrAbortHandler) })
	rt := httpadmit.Transport(ex, base)
	for range 2 {
		func() {
			defer func() {
				if v := recover(); v != http.ErrAbortHandler {
					t.Errorf("recovered %v, want http.ErrAbortHandler", v)
				}
			}()
			req, _ := http.NewRequest(http.MethodGet, "http://svc.test/", nil)
			_, _ = rt.RoundTrip(req)
		}()
	}
	if s, _ := ex.GroupStats("svc.test:80"); s.Failed != 0 || s.Cancelled != 2 || s.Breaker != breaker.StateClosed {
		t.Errorf("%d failed, %d cancelled, breaker %v; want 0, 2 and closed", s.Failed, s.Cancelled, s.Breaker)
	}
}
