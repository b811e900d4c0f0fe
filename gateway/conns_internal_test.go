package gateway

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// dialAddr is the address net/http's transport dials for a backend, as
// trackedConn records it: a reload retires a removed backend's
// connections by it.
func TestDialAddrIsWhatTheTransportDials(t *testing.T) {
	errDialed := errors.New("dialed")
	var dialed string
	tr := &http.Transport{DialContext: func(_ context.Context, _, addr string) (net.Conn, error) {
		dialed = addr
		return nil, errDialed
	}}
	defer tr.CloseIdleConnections()
	for _, raw := range []string{
		"http://127.0.0.1:8081", "http://LocalHost", "http://[::1]:9000/base", "http://[::1]",
		"http://bücher.example:81", "http://Example.COM.:8080/x?y=1",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		dialed = ""
		if _, err := tr.RoundTrip(&http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}}); !errors.Is(err, errDialed) {
			t.Fatalf("%s: %v, want the dial's error", raw, err)
		}
		if got := dialAddr(u); got != strings.ToLower(dialed) {
			t.Errorf("%s: dialAddr %q, the transport dials %q", raw, got, dialed)
		}
	}
}
