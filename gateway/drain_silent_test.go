package gateway_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/groupexec/groupexec/gateway"
)

// A connection that has sent no request (a client's preconnect, a TLS
// handshake never begun) holds no request, and does not hold the drain:
// Serve closes it as the drain begins, as net/http's Shutdown closes
// keep-alive connections, and returns once the requests are done. Left
// to net/http, which takes such a connection for idle only once it is 5
// seconds old, it held Shutdown that long (and with drain_timeout under
// 5s the drain ran to its deadline and logged requests cancelled that
// were none). Hence the bound of 4 seconds.
func TestDrainNotHeldByConnectionWithoutRequest(t *testing.T) {
	p := newPKI(t)
	for name, key := range map[string]string{"plain": "", "tls": tlsConfig(p)} {
		t.Run(name, func(t *testing.T) {
			be := backend(t, func(http.ResponseWriter, *http.Request) {})
			gw := start(t, be.URL, minimal+key+"drain_timeout: 1m\ntimeouts: {read_header: 1m, read: 1m, write: 1m}\n")
			dialRaw(t, gw.url) // sends nothing
			eventually(t, "the connection to be accepted", func() bool { return gateway.IdleConns(gw.gw) == 1 })
			stopped := make(chan error, 1)
			go func() { stopped <- gw.stop() }()
			select {
			case err := <-stopped:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(4 * time.Second):
				t.Fatal("the drain waits on a connection that sent no request")
			}
		})
	}
}
