package httpadmit_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/policy"
)

// countedBody counts its Closes.
type countedBody struct {
	*strings.Reader
	closes atomic.Int32
}

func (b *countedBody) Close() error { b.closes.Add(1); return nil }

// A RoundTripper must close the request's body whatever happens: a tenant
// or weight function that panics leaves the body closed once, the panic
// going on to RoundTrip's caller as a panic of base does, and takes no slot.
func TestTransportClosesBodyWhenAFunctionPanics(t *testing.T) {
	tenantPanics := httpadmit.WithTenantFunc(func(*http.Request) (string, error) { panic("tenant broke") })
	weightPanics := httpadmit.WithWeightFunc(func(*http.Request) (int, error) { panic("weight broke") })
	for _, tc := range []struct {
		name string
		opt  httpadmit.Option
		want string
	}{{"tenant", tenantPanics, "tenant broke"}, {"weight", weightPanics, "weight broke"}} {
		t.Run(tc.name, func(t *testing.T) {
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)})
			base := roundTripper(func(*http.Request) (*http.Response, error) {
				t.Error("a request whose function panicked was sent")
				return nil, nil
			})
			rt := httpadmit.Transport(ex, base, tc.opt)
			body := &countedBody{Reader: strings.NewReader("payload")}
			req, _ := http.NewRequest(http.MethodPost, "http://svc.test/", body)
			func() {
				defer func() {
					if v := recover(); v != tc.want {
						t.Errorf("recovered %v, want %q", v, tc.want)
					}
				}()
				rt.RoundTrip(req)
			}()
			if n := body.closes.Load(); n != 1 {
				t.Errorf("body closed %d times, want 1", n)
			}
			if s := ex.Stats(); s.Running != 0 || s.Waiting != 0 || s.TaskCounts.Submitted != 0 {
				t.Errorf("%d running, %d waiting, %d submitted; want no slot taken", s.Running, s.Waiting, s.TaskCounts.Submitted)
			}
		})
	}
}
