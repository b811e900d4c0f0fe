package gateway_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"testing"

	"github.com/groupexec/groupexec/gateway"
	"github.com/groupexec/groupexec/gateway/config"
)

// A reload that changes timeouts.write on a gateway serving HTTP/2 is
// applied, and says in the log that HTTP/2 connections keep the write byte
// timeout the gateway started with, which net/http reads from the
// server's config as each connection starts; without TLS, or with
// timeouts.write unchanged, it says nothing of it.
func TestReloadSaysHTTP2KeepsItsWriteByteTimeout(t *testing.T) {
	p := newPKI(t)
	be := backend(t, func(http.ResponseWriter, *http.Request) {}).URL
	const note = "HTTP/2 connections keep the write byte timeout"
	for _, tc := range []struct {
		name, tls string
		write     string
		want      int
	}{
		{"tls, write changed", tlsConfig(p), "7s", 1},
		{"tls, write unchanged", tlsConfig(p), "5s", 0},
		{"plain, write changed", "", "7s", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &records{}
			body := "backends: [%s]\ntimeouts: {write: 5s}\n" + tc.tls
			gw := start(t, be, body, gateway.WithLogger(slog.New(logs)))
			cfg, err := config.Parse(fmt.Appendf(nil, "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nbackends: [%s]\ntimeouts: {write: %s}\n%s", be, tc.write, tc.tls))
			if err != nil {
				t.Fatal(err)
			}
			if err := gw.gw.Reload(cfg); err != nil {
				t.Fatal(err)
			}
			if got := gw.gw.Config().Timeouts.Write.String(); got != tc.write {
				t.Errorf("timeouts.write in force %s, want %s", got, tc.write)
			}
			recs := logs.matching(note)
			if len(recs) != tc.want {
				t.Fatalf("%d log records saying %q, want %d", len(recs), note, tc.want)
			}
			if tc.want > 0 && recs[0].Level != slog.LevelWarn {
				t.Errorf("logged at %v, want WARN", recs[0].Level)
			}
		})
	}
}
