package httpadmit_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/groupexec/groupexec/httpadmit"
)

// The response's Request is the caller's request, as net/http's Transport
// sets it, not the copy the base was sent with: that copy carries the
// admission's context, which ends with the slot, so a caller (or an outer
// RoundTripper) using resp.Request's context after Close found it cancelled
// while its own request lived on.
func TestTransportResponseRequestIsTheCallers(t *testing.T) {
	ex := newExec(t, nil)
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	base := http.DefaultTransport.(*http.Transport).Clone()
	defer base.CloseIdleConnections()
	rt := httpadmit.Transport(ex, base)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Request != req {
		t.Errorf("resp.Request is not the request sent to RoundTrip")
	}
	if err := resp.Request.Context().Err(); err != nil {
		t.Errorf("resp.Request's context ended with the slot (%v) while the request's lives on", err)
	}
}
