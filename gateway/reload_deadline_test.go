package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/groupexec/groupexec/gateway/config"
)

// reloadingBody is a request body that has the gateway reloaded as it is
// read: the request has read its config on arrival, and its backend is
// given it after the reload.
type reloadingBody struct {
	io.Reader
	reload func()
	done   bool
}

func (b *reloadingBody) Read(p []byte) (int, error) {
	if !b.done {
		b.done = true
		b.reload()
	}
	return b.Reader.Read(p)
}

func (b *reloadingBody) Close() error { return nil }

// A request finishes under the config it arrived with (docs/gateway.md,
// Reload), its deadline too: whether its backend is held to that deadline
// is judged against the timeouts.upstream the deadline was set from, not
// the one of a reload that came meanwhile, by the backend's breaker as by
// the tenant's. Given 20 minutes of an hour, the backend is not held to
// the deadline, though a reload has since set timeouts.upstream to 30
// minutes; given 20 minutes of 30, it is, though a reload has since set it
// to an hour. Judged by the reloaded value, the backend's breaker counted
// a missed deadline that the tenant's did not, or the other way round.
func TestReloadKeepsARequestsDeadlineJudgedByItsTimeout(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		want     int // the next request's status
	}{
		{"1h", "30m", http.StatusOK},                 // no breaker open
		{"30m", "1h", http.StatusServiceUnavailable}, // the breaker open
	} {
		for _, br := range breakers {
			t.Run(tc.from+"-to-"+tc.to+"/"+br.per, func(t *testing.T) {
				// A backend that stalls until the gateway gives the request
				// up, once it has read the body: net/http ends the context of
				// a request whose body is left unread only as the body ends.
				arrived := make(chan struct{}, 1)
				url := backend(t, func(w http.ResponseWriter, r *http.Request) {
					io.Copy(io.Discard, r.Body)
					if r.URL.Path == "/held" {
						arrived <- struct{}{}
						<-r.Context().Done()
					}
				}).URL
				yaml := minimal + br.config + "timeouts: {upstream: %s}\n"
				g := build(t, url, fmt.Sprintf(yaml, "%s", tc.from))
				t.Cleanup(func() { g.Close() })
				reload := func() {
					cfg, err := config.Parse(fmt.Appendf(nil, yaml, url, tc.to))
					if err != nil {
						t.Error(err)
						return
					}
					cfg.Listen, cfg.Admin = g.Config().Listen, g.Config().Admin
					if err := g.Reload(cfg); err != nil {
						t.Error(err)
					}
				}
				// 20 minutes left: the rest spent in the queue.
				ctx := &closingContext{expiringContext: newExpiringContext(), at: time.Now().Add(20 * time.Minute)}
				r := httptest.NewRequestWithContext(served(ctx), http.MethodPost, "/held", nil)
				r.Header.Set("X-Tenant", "a")
				r.Body = &reloadingBody{Reader: strings.NewReader("x"), reload: reload}
				r.ContentLength = 1
				rec := httptest.NewRecorder()
				done := make(chan any, 1)
				go func() { done <- serveCut(g, rec, r) }()
				select {
				case <-arrived:
				case <-time.After(bound):
					t.Fatal("the request did not reach the backend")
				}
				ctx.expire()
				select {
				case v := <-done:
					if v != nil && v != http.ErrAbortHandler {
						panic(v)
					}
				case <-time.After(bound):
					t.Fatal("the request did not end")
				}
				if rec.Code != http.StatusGatewayTimeout {
					t.Fatalf("the request past its deadline was answered %d, want 504", rec.Code)
				}
				if got, want := g.Config().Timeouts.Upstream, mustDuration(t, tc.to); got != want {
					t.Fatalf("timeouts.upstream is %v after the reload, want %v", got, want)
				}
				if code, body := next(g, br.next); code != tc.want {
					t.Errorf("the next request: %d %q, want %d", code, body, tc.want)
				}
			})
		}
	}
}

func mustDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
