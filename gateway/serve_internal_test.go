package gateway

import (
	"context"
	"log/slog"
	"math"
	"net"
	"testing"
	"time"

	"github.com/groupexec/groupexec/gateway/config"
)

// A reload that lands while Serve starts, after it has read its config but
// before its listener is in place (a SIGHUP right after a deploy, which the
// groupexec command takes from before the gateway serves), still gives the
// listener its max_conns and max_conns_per_client: the listener does not
// keep the caps of the config Serve read.
func TestReloadAsServeStartsReachesTheListener(t *testing.T) {
	parse := func(caps string) *config.Config {
		t.Helper()
		cfg, err := config.Parse([]byte("listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nbackends: [http://127.0.0.1:1]\n" + caps))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	g, err := New(parse("max_conns: 100\nmax_conns_per_client: 50\n"), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	g.reload.configRead = func() {
		if err := g.Reload(parse("max_conns: 3\nmax_conns_per_client: 2\n")); err != nil {
			t.Error(err)
		}
	}
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	al, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx, pl, al) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-g.Serving():
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not start serving")
	}
	l := g.clients.Load()
	l.mu.Lock()
	max, perMax := l.max, l.perMax
	l.mu.Unlock()
	if max != 3 || perMax != 2 {
		t.Errorf("listener caps: max_conns %d, max_conns_per_client %d; want the reloaded 3 and 2", max, perMax)
	}
}

// sumDurations adds timeouts as they are, and stops at the longest
// duration there is where their sum would wrap to a negative one (the
// admin server's read timeout, timeouts.read_header plus timeouts.read,
// would then be none at all).
func TestSumDurationsSaturates(t *testing.T) {
	const huge = 1000000 * time.Hour
	for _, c := range []struct {
		ds   []time.Duration
		want time.Duration
	}{
		{[]time.Duration{time.Second, 2 * time.Second}, 3 * time.Second},
		{[]time.Duration{huge, huge, huge}, math.MaxInt64},
		{[]time.Duration{math.MaxInt64, 1}, math.MaxInt64},
		{[]time.Duration{math.MaxInt64 - 1, 1}, math.MaxInt64},
	} {
		if got := sumDurations(c.ds...); got != c.want {
			t.Errorf("sumDurations(%v) = %v, want %v", c.ds, got, c.want)
		}
	}
}

// A client's share of admin_max_conns is an eighth of it, rounded up, for
// any admin_max_conns the config takes: rounded up by adding 7 first, the
// largest wrapped to a negative share, under which every client address
// held one admin connection at most.
func TestAdminPerClientDoesNotOverflow(t *testing.T) {
	for _, tc := range []struct{ conns, want int }{
		{1, 1}, {8, 1}, {9, 2}, {64, 8}, {65, 9},
		{math.MaxInt, math.MaxInt/8 + 1}, {math.MaxInt - 7, math.MaxInt / 8},
	} {
		if got := adminPerClient(tc.conns); got != tc.want {
			t.Errorf("adminPerClient(%d) = %d, want %d", tc.conns, got, tc.want)
		}
	}
}
