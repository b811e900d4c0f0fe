package gateway

import (
	"context"
	"net"
	"net/url"
	"testing"
)

// A readiness check whose caller has gone away still probes the backends
// to the end: its answer is kept for the next probeTTL and given to every
// caller, so a caller that cut its own check short must not make the
// gateway look unready to the others.
func TestReadinessNotDecidedByAGoneCaller(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	st := &state{backends: []*url.URL{{Scheme: "http", Host: ln.Addr().String()}}}
	h := newHealth(func() *state { return st }, &tracker{})
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	h.ready(gone)
	if why := h.ready(context.Background()); why != "" {
		t.Errorf("after a check whose caller had gone: %q, want ready (the backend accepts connections)", why)
	}
}
