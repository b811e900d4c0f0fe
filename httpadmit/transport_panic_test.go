package httpadmit_test

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/internal/adaptertest"
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

// A request context whose code panics where the Transport's own goroutine
// calls it (its Done as the admission begins, its Value as it is watched,
// its Err as the executor asks it) does not crash the process from a
// goroutine no one can recover on: the panic goes on to RoundTrip's
// caller, as if it had been called there, the request's body closed once
// and no slot kept.
func TestTransportRequestContextPanics(t *testing.T) {
	for _, method := range []string{"Done", "Value", "Err"} {
		t.Run(method, func(t *testing.T) {
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)})
			rt := httpadmit.Transport(ex, roundTripper(func(*http.Request) (*http.Response, error) {
				t.Error("a request whose context panicked was sent")
				return nil, errors.New("sent")
			}))
			body := &countedBody{Reader: strings.NewReader("payload")}
			ctx := &adaptertest.Panicking{Method: method, Panic: "context broke"}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://svc.test/", body)
			func() {
				defer func() {
					if v := recover(); v != "context broke" {
						t.Errorf("recovered %v, want %q", v, "context broke")
					}
				}()
				rt.RoundTrip(req)
			}()
			if n := body.closes.Load(); n != 1 {
				t.Errorf("body closed %d times, want 1", n)
			}
			if s := ex.Stats(); s.Running != 0 || s.Waiting != 0 {
				t.Errorf("%d running, %d waiting; want no slot kept", s.Running, s.Waiting)
			}
		})
	}
}
