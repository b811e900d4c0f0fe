package httpadmit_test

import (
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/policy"
)

// A WithFailureStatus function that panics, or calls runtime.Goexit, as it
// judges a response goes on to RoundTrip's caller, who never gets the
// response: its body is closed first, or the connection it holds
// (net/http's, until the body is closed) would never be freed. base
// returned, having closed the request's body as the RoundTripper contract
// asks, so that body is not closed again.
func TestTransportClosesTheResponseWhenTheFailureFunctionPanics(t *testing.T) {
	for _, tc := range []struct {
		name  string
		judge func(int) bool
	}{
		{"panic", func(int) bool { panic("judge broke") }},
		{"goexit", func(int) bool { runtime.Goexit(); return false }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)})
			resp := &countedBody{Reader: strings.NewReader("answer")}
			base := roundTripper(func(r *http.Request) (*http.Response, error) {
				r.Body.Close() // as net/http's Transport does once it has sent it
				return &http.Response{StatusCode: http.StatusInternalServerError, Body: resp}, nil
			})
			rt := httpadmit.Transport(ex, base, httpadmit.WithFailureStatus(tc.judge))
			body := &countedBody{Reader: strings.NewReader("payload")}
			req, _ := http.NewRequest(http.MethodPost, "http://svc.test/", body)
			ended := make(chan any, 1)
			go func() {
				returned := false
				defer func() {
					if !returned {
						ended <- recover() // nil after a runtime.Goexit
					}
				}()
				rt.RoundTrip(req)
				returned = true
				ended <- "RoundTrip returned"
			}()
			if v, want := <-ended, map[string]any{"panic": "judge broke", "goexit": nil}[tc.name]; v != want {
				t.Errorf("RoundTrip's caller ended with %v, want %v", v, want)
			}
			if n := resp.closes.Load(); n != 1 {
				t.Errorf("response body closed %d times, want 1", n)
			}
			if n := body.closes.Load(); n != 1 {
				t.Errorf("request body closed %d times, want 1 (by base)", n)
			}
			if n := inFlight(ex, "svc.test:80"); n != 0 {
				t.Errorf("%d in flight after RoundTrip's caller ended", n)
			}
		})
	}
}
