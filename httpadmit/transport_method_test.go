package httpadmit_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/policy"
)

// A request whose method is no token (RFC 9110 section 9.1), which an
// HTTP/2 server hands its handler ("G T") and a proxy passes on, is one
// net/http's transport refuses to send: it is refused before admission,
// takes no slot and counts as nothing of the destination's. Sent to base,
// its refusal counted as the destination's failure, and any client of a
// proxy over the Transport could open the destination's breaker with it.
func TestTransportRefusesAMethodThatIsNoToken(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)})
	srv := serve(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	rt := httpadmit.Transport(ex, srv.Client().Transport)
	u, _ := url.Parse(srv.URL)
	for _, m := range []string{"G T", "G(T", "GET/"} {
		req := &http.Request{Method: m, URL: u, Header: http.Header{}, Host: u.Host}
		if resp, err := rt.RoundTrip(req); err == nil {
			resp.Body.Close()
			t.Fatalf("method %q: sent", m)
		}
	}
	if s, _ := ex.GroupStats(host(t, srv.URL)); s.Submitted != 0 || s.Failed != 0 {
		t.Errorf("methods that are no token reached the executor: %d submitted, %d failed", s.Submitted, s.Failed)
	}
}
