package httpadmit_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/policy"
)

// RoundTrip closes the request's body on every outcome, and the body is
// closed once in all, counting the Closes of base and of http.Client,
// which closes it too on some of its own paths: on a refusal, an invalid
// tenant or weight, a deadline that passed at admission, a base's error
// after it closed the body (as net/http's Transport does), a base's
// response, a context cancelled while base sends.
func TestTransportClosesBodyOnceThroughClient(t *testing.T) {
	closing := func(err error) roundTripper {
		return func(r *http.Request) (*http.Response, error) {
			if r.Body != nil {
				r.Body.Close()
			}
			if err != nil {
				return nil, err
			}
			return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("ok"))}, nil
		}
	}
	// cancelSending cancels the context of the case "cancelled while
	// sending" from within its base, as the base sends.
	var cancelSending context.CancelFunc
	for _, tc := range []struct {
		name    string
		popts   []policy.Option
		opts    []httpadmit.Option
		base    http.RoundTripper
		ctx     func() context.Context
		wantErr bool
	}{
		{name: "sent", base: closing(nil)},
		{name: "base error", base: closing(errors.New("connection refused")), wantErr: true},
		{name: "refused", popts: []policy.Option{policy.WithDefaultMaxInFlight(1), policy.WithDefaultMaxConcurrency(1)},
			base: closing(nil), wantErr: true},
		{name: "invalid tenant", opts: []httpadmit.Option{httpadmit.WithTenantHeader("X-Tenant")},
			base: closing(nil), wantErr: true},
		{name: "invalid weight", opts: []httpadmit.Option{httpadmit.WithWeightFunc(func(*http.Request) (int, error) { return -1, nil })},
			base: closing(nil), wantErr: true},
		{name: "cancelled before", base: closing(nil), wantErr: true, ctx: func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}},
		{name: "cancelled while sending", wantErr: true,
			base: roundTripper(func(r *http.Request) (*http.Response, error) {
				cancelSending()
				<-r.Context().Done()
				r.Body.Close() // as net/http's Transport does on every outcome
				return nil, r.Context().Err()
			}),
			ctx: func() context.Context {
				ctx, cancel := context.WithCancel(context.Background())
				cancelSending = cancel
				return ctx
			}},
		{name: "stacked refused", popts: []policy.Option{policy.WithDefaultMaxInFlight(1), policy.WithDefaultMaxConcurrency(1)},
			opts: []httpadmit.Option{httpadmit.WithTenantHeader("X-Other")}, base: nil, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := newExec(t, tc.popts)
			base := tc.base
			if base == nil { // a Transport below, on an executor of its own, whose one slot is held
				below := newExec(t, tc.popts)
				base = httpadmit.Transport(below, closing(nil))
				held, err := base.RoundTrip(mustRequest(t, context.Background(), nil))
				if err != nil {
					t.Fatal(err)
				}
				defer held.Body.Close()
			} else if tc.name == "refused" {
				held, err := httpadmit.Transport(ex, base).RoundTrip(mustRequest(t, context.Background(), nil))
				if err != nil {
					t.Fatal(err)
				}
				defer held.Body.Close()
			}
			ctx := context.Background()
			if tc.ctx != nil {
				ctx = tc.ctx()
			}
			client := &http.Client{Transport: httpadmit.Transport(ex, base, tc.opts...)}
			body := &countedBody{Reader: strings.NewReader("payload")}
			req := mustRequest(t, ctx, body)
			req.Header["X-Tenant"] = []string{"a", "b"} // invalid under WithTenantHeader("X-Tenant")
			resp, err := client.Do(req)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Do: %v, want an error: %v", err, tc.wantErr)
			}
			if resp != nil {
				resp.Body.Close()
			}
			if n := body.closes.Load(); n != 1 {
				t.Errorf("body closed %d times, want 1", n)
			}
		})
	}
}

// A base that closes the request's body and then panics, or calls
// runtime.Goexit, has its body closed a second time by RoundTrip, as
// Transport's doc says: RoundTrip cannot tell it from a base that did not
// close it without wrapping every request's body. The slot is free.
func TestTransportClosesAgainABodyBaseClosedBeforeItPanicked(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func()
	}{
		{"panic", func() { panic("base broke") }},
		{"goexit", runtime.Goexit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := newExec(t, nil)
			rt := httpadmit.Transport(ex, roundTripper(func(r *http.Request) (*http.Response, error) {
				r.Body.Close()
				tc.end()
				return nil, nil
			}))
			body := &countedBody{Reader: strings.NewReader("payload")}
			ended := make(chan struct{})
			go func() {
				defer close(ended)
				defer func() { _ = recover() }()
				_, _ = rt.RoundTrip(mustRequest(t, context.Background(), body))
			}()
			<-ended
			if n := body.closes.Load(); n != 2 {
				t.Errorf("body closed %d times, want 2 (base's, then RoundTrip's)", n)
			}
			if s := ex.Stats(); s.Running != 0 || s.Waiting != 0 {
				t.Errorf("%d running, %d waiting; want the slot free", s.Running, s.Waiting)
			}
		})
	}
}

// mustRequest is a POST to svc.test with body (none when nil).
func mustRequest(t *testing.T, ctx context.Context, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://svc.test/", body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
