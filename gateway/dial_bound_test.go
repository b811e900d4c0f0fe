package gateway_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/groupexec/groupexec/gateway"
)

// A dial to a backend that does not answer it (a host down, its packets
// dropped) ends within the deadline of the request it was made for, not
// when the system gives up (two minutes on Linux): net/http's transport
// dials on a context of its own, cut from the request's cancellation and
// deadline, so that each request to such a backend left a dial, its
// goroutine and its socket, behind it for that long.
func TestBackendDialEndsWithinTheRequestsTimeout(t *testing.T) {
	const upstream = 300 * time.Millisecond
	be := backend(t, func(http.ResponseWriter, *http.Request) {})
	g := build(t, be.URL, "backends: [%s]\ntimeouts: {upstream: 300ms}\n")
	type dial struct {
		deadline time.Time
		bounded  bool
		ended    <-chan struct{}
	}
	dials := make(chan dial, 1)
	gateway.OnBackendDial(g, func(ctx context.Context, _ string) error {
		dl, ok := ctx.Deadline()
		select {
		case dials <- dial{dl, ok, ctx.Done()}:
		default: // a later dial's (a retry's): the first is the one watched
		}
		<-ctx.Done() // a connect that never completes
		return ctx.Err()
	})
	gw := serve(t, g)
	sent := time.Now()
	if code, _ := get(t, client(t), gw.url); code != http.StatusGatewayTimeout {
		t.Errorf("status %d, want 504", code)
	}
	d := <-dials
	if !d.bounded {
		t.Error("the dial has no deadline")
	} else if d.deadline.After(sent.Add(upstream + bound)) {
		t.Errorf("the dial's deadline is %v after the request, want within timeouts.upstream (%v)", d.deadline.Sub(sent), upstream)
	}
	select {
	case <-d.ended:
	case <-time.After(bound):
		t.Fatalf("the dial is still under way %v after its request was answered", bound)
	}
}
