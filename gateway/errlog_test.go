package gateway_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/gateway"
)

// records is a slog.Handler that keeps what it is given.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *records) Enabled(context.Context, slog.Level) bool { return true }
func (h *records) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *records) WithGroup(string) slog.Handler            { return h }
func (h *records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.recs = append(h.recs, r.Clone())
	h.mu.Unlock()
	return nil
}

// matching returns the records whose message contains s.
func (h *records) matching(s string) []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []slog.Record
	for _, r := range h.recs {
		if strings.Contains(r.Message, s) {
			out = append(out, r)
		}
	}
	return out
}

// A client failing TLS handshakes makes net/http log a line for each: the
// servers' error log writes 10 a second at the most, and the next line
// after a pause says how many it dropped, so that a client cannot fill the
// log as fast as it connects.
func TestFailedHandshakesLogTenLinesASecond(t *testing.T) {
	p := newPKI(t)
	logs := &records{}
	clk := clock.NewFake(time.Unix(1e9, 0))
	be := backend(t, func(http.ResponseWriter, *http.Request) {})
	gw := start(t, be.URL, minimal+tlsConfig(p),
		gateway.WithLogger(slog.New(logs)), gateway.WithClock(clk))
	addr := strings.TrimPrefix(gw.url, "http://")
	// badHandshake sends bytes that are no TLS record and waits for the
	// server to close the connection, which it does once it has logged.
	badHandshake := func() {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(bound))
		if _, err := c.Write([]byte("\x16\x03\x01\x00\x05hello, not TLS\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, c)
	}
	const handshake = "TLS handshake error"
	for range 30 {
		badHandshake()
	}
	if got := len(logs.matching(handshake)); got != 10 {
		t.Fatalf("%d lines logged for 30 failed handshakes within a second, want 10", got)
	}
	clk.Advance(time.Second)
	badHandshake()
	lines := logs.matching(handshake)
	if len(lines) != 11 {
		t.Fatalf("%d lines logged after a second more and one more failed handshake, want 11", len(lines))
	}
	var suppressed int64 = -1
	lines[10].Attrs(func(a slog.Attr) bool {
		if a.Key == "suppressed" {
			suppressed = a.Value.Int64()
		}
		return true
	})
	if suppressed != 20 {
		t.Errorf("the line after the pause says suppressed=%d, want 20", suppressed)
	}
}

// A body the spool cannot store (its directory gone, a disk full) is the
// gateway's own failure, which the client's 500 spool_failed tells no
// operator: it is logged, with the directory and the cause.
func TestSpoolFailureIsLogged(t *testing.T) {
	logs := &records{}
	be := backend(t, func(http.ResponseWriter, *http.Request) { t.Error("the backend got a request") })
	dir := t.TempDir()
	gw := start(t, be.URL, minimal+fmt.Sprintf("body: {buffer_bytes: 1024, spool_dir: %s}\n", dir),
		gateway.WithLogger(slog.New(logs)))
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	resp, msg := do(t, client(t), http.MethodPost, gw.url, "a", strings.NewReader(strings.Repeat("x", 4096)))
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(msg, "spool_failed") {
		t.Fatalf("%d %q, want 500 spool_failed", resp.StatusCode, msg)
	}
	lines := logs.matching("spool failed")
	if len(lines) != 1 {
		t.Fatalf("%d log lines for the failed spool, want 1", len(lines))
	}
	attrs := map[string]string{}
	lines[0].Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.String()
		return true
	})
	if lines[0].Level != slog.LevelError || attrs["dir"] != dir || attrs["tenant"] != "a" || !strings.Contains(attrs["err"], "no such file") {
		t.Errorf("logged at %v with %v; want ERROR with dir %s, tenant a and the cause", lines[0].Level, attrs, dir)
	}
}
