package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/groupexec/groupexec/gateway"
	"github.com/groupexec/groupexec/gateway/config"
)

// syncBuffer is a bytes.Buffer a logger and a test may use at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// A SIGHUP that reaches a gateway Serve has already closed (one arriving
// as Serve returns, before the command stops taking them) reloads nothing
// and stops the reloads: it is not logged as a file refused with "the old
// config kept", of a gateway that no longer runs.
func TestSIGHUPAfterCloseStopsReloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	write := func(limit int) {
		t.Helper()
		body := fmt.Sprintf("listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nbackends: [http://127.0.0.1:1]\nlimits: {global_max_in_flight: %d}\n", limit)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(5)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	gw, err := gateway.New(cfg, gateway.WithLogger(log), gateway.WithConfigFile(path))
	if err != nil {
		t.Fatal(err)
	}
	gw.Close() // as Serve leaves it, its drain done
	write(7)

	hup := make(chan os.Signal) // unbuffered: a send returns once the loop has it
	served := make(chan struct{})
	defer close(served)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		reloadOnSignal(hup, served, gw, log)
	}()
	hup <- syscall.SIGHUP
	select {
	case <-stopped:
	case <-time.After(bound):
		t.Fatalf("the reloads go on after one found the gateway closed\n%s", logs.String())
	}
	if out := logs.String(); strings.Contains(out, "refused") || strings.Contains(out, "config reloaded") {
		t.Errorf("a SIGHUP to a closed gateway was logged as a reload or a refused file:\n%s", out)
	}
	if got := *gw.Config().Limits.GlobalMaxInFlight; got != 5 {
		t.Errorf("global_max_in_flight in force: %d, want 5", got)
	}
}
