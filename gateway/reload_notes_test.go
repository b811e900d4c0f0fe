package gateway_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"testing"

	"github.com/groupexec/groupexec/gateway"
	"github.com/groupexec/groupexec/gateway/config"
)

// A reload changing timeouts that net/http's server over TLS keeps as it
// started is applied, and says in the log, at WARN, what keeps the old
// value: HTTP/2 connections their write byte timeout (timeouts.write),
// which net/http reads from the server's config as each connection
// starts, and a TLS handshake its bound, the shortest of
// timeouts.read_header, read and write. Without TLS, or with the values
// unchanged, it says nothing of them.
func TestReloadSaysWhatTheTLSServerKeeps(t *testing.T) {
	p := newPKI(t)
	be := backend(t, func(http.ResponseWriter, *http.Request) {}).URL
	const (
		h2Note        = "HTTP/2 connections keep the write byte timeout"
		handshakeNote = "a TLS handshake keeps the bound"
	)
	for _, tc := range []struct {
		name, tls, timeouts string
		notes               []string
	}{
		{"tls, write longer", tlsConfig(p), "{write: 7s}", []string{h2Note}},
		{"tls, write shorter", tlsConfig(p), "{write: 2s}", []string{h2Note, handshakeNote}},
		{"tls, read shorter", tlsConfig(p), "{write: 5s, read: 2s}", []string{handshakeNote}},
		{"tls, unchanged", tlsConfig(p), "{write: 5s}", nil},
		{"plain, write shorter", "", "{write: 2s}", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &records{}
			body := "backends: [%s]\ntimeouts: {write: 5s, read: 5s, read_header: 5s}\n" + tc.tls
			gw := start(t, be, body, gateway.WithLogger(slog.New(logs)))
			cfg, err := config.Parse(fmt.Appendf(nil, "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nbackends: [%s]\ntimeouts: %s\n%s", be, tc.timeouts, tc.tls))
			if err != nil {
				t.Fatal(err)
			}
			if err := gw.gw.Reload(cfg); err != nil {
				t.Fatal(err)
			}
			if gw.gw.Config() != cfg {
				t.Error("the reload was not applied")
			}
			for _, note := range []string{h2Note, handshakeNote} {
				want := 0
				for _, n := range tc.notes {
					if n == note {
						want = 1
					}
				}
				recs := logs.matching(note)
				if len(recs) != want {
					t.Errorf("%d log records saying %q, want %d", len(recs), note, want)
				}
				for _, r := range recs {
					if r.Level != slog.LevelWarn {
						t.Errorf("%q logged at %v, want WARN", note, r.Level)
					}
				}
			}
		})
	}
}
