package gateway

import (
	"context"
	"log"
	"log/slog"
	"sync"
	"time"

	"github.com/groupexec/groupexec/clock"
)

// errLogLines is how many lines the servers' and the proxy's error log
// writes a second. net/http writes a line for each connection that fails
// in its own way (a TLS handshake that fails, an HTTP/2 client breaking
// the protocol), so that any client could otherwise make the log grow as
// fast as it connects, and bury the gateway's own messages. Lines beyond
// the rate are counted, and the next line written says how many were
// dropped ("suppressed").
const errLogLines = 10

// newErrLog returns the logger the gateway's servers and proxy write their
// errors to: h at Warn, errLogLines a second at the most, one budget for
// all of them.
func newErrLog(h slog.Handler, clk clock.Clock) *log.Logger {
	return slog.NewLogLogger(rated(h, clk), slog.LevelWarn)
}

// rated returns h writing errLogLines a second at the most, on clk.
func rated(h slog.Handler, clk clock.Clock) slog.Handler {
	return &ratedHandler{Handler: h, r: &logRate{clk: clk}}
}

// logRate is the budget a ratedHandler and the handlers derived from it
// share: errLogLines a second, in windows of one second.
type logRate struct {
	clk     clock.Clock
	mu      sync.Mutex
	start   time.Time // of the current window
	lines   int       // written in it
	dropped int       // since the last line written
}

// take reports whether a line may be written now, and how many were
// dropped before it.
func (r *logRate) take() (ok bool, dropped int) {
	now := r.clk.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if d := now.Sub(r.start); d >= time.Second || d < 0 {
		r.start, r.lines = now, 0
	}
	if r.lines == errLogLines {
		r.dropped++
		return false, 0
	}
	r.lines++
	dropped, r.dropped = r.dropped, 0
	return true, dropped
}

// ratedHandler writes records to Handler within its logRate.
type ratedHandler struct {
	slog.Handler
	r *logRate
}

func (h *ratedHandler) Handle(ctx context.Context, rec slog.Record) error {
	ok, dropped := h.r.take()
	if !ok {
		return nil
	}
	if dropped > 0 {
		rec = rec.Clone()
		rec.AddAttrs(slog.Int("suppressed", dropped))
	}
	return h.Handler.Handle(ctx, rec)
}

func (h *ratedHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &ratedHandler{Handler: h.Handler.WithAttrs(as), r: h.r}
}

func (h *ratedHandler) WithGroup(name string) slog.Handler {
	return &ratedHandler{Handler: h.Handler.WithGroup(name), r: h.r}
}
