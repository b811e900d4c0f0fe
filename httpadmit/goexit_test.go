package httpadmit_test

import (
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/policy"
)

// A base RoundTripper that calls runtime.Goexit (a test transport calling
// t.FailNow, say) frees its slot and does not leave RoundTrip's caller
// waiting for ever: the caller's goroutine ends as well, as it would without
// the Transport, or RoundTrip returns.
func TestTransportBaseGoexit(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)})
	base := roundTripper(func(*http.Request) (*http.Response, error) {
		runtime.Goexit()
		return nil, nil
	})
	rt := httpadmit.Transport(ex, base)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		req, _ := http.NewRequest(http.MethodGet, "http://svc.test/", nil)
		resp, err := rt.RoundTrip(req)
		if err == nil && resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("RoundTrip's caller is still blocked 10s after the base RoundTripper called runtime.Goexit")
	}
	if n := inFlight(ex, "svc.test:80"); n != 0 {
		t.Errorf("%d in flight after the base called runtime.Goexit", n)
	}
}
