package httpadmit_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/httpadmit"
)

// Every host net/http can send to has a destination group: a DNS name of
// more than MaxTenantLen bytes (names go up to 253) and an
// internationalized one are sent, each in its own group.
func TestTransportSendsToEveryHost(t *testing.T) {
	ex := newExec(t, nil)
	base := roundTripper(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
	})
	rt := httpadmit.Transport(ex, base)
	long := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + ".example"
	for _, u := range []string{"https://" + long + "/", "http://bücher.example/"} {
		req, err := http.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Errorf("%s: %v", u, err)
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
