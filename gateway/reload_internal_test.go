package gateway

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/groupexec/groupexec/gateway/config"
)

// Two reloads at once (a SIGHUP and a POST /reload, or two of either after
// two writes of the file) leave the newer file in force: one that read
// the file first is never applied after one that read it later, undoing
// it.
func TestConcurrentReloadsKeepTheNewerFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	write := func(limit int) {
		body := fmt.Sprintf("backends: [http://127.0.0.1:1]\nlimits: {global_max_in_flight: %d}\n", limit)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(1)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, WithConfigFile(path), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	write(2)
	var first atomic.Bool
	first.Store(true)
	second := make(chan error, 1)
	g.reload.fileRead = func() {
		if !first.CompareAndSwap(true, false) {
			return
		}
		// The file changes, and a second reload comes, once the first
		// has read it.
		write(3)
		if g.reload.mu.TryLock() {
			// Nothing keeps the second from running to its end before
			// the first applies what it read.
			g.reload.mu.Unlock()
			second <- g.ReloadFile()
			return
		}
		go func() { second <- g.ReloadFile() }()
	}
	if err := g.ReloadFile(); err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if got := *g.Config().Limits.GlobalMaxInFlight; got != 3 {
		t.Errorf("global_max_in_flight %d in force after both reloads, want the newer file's 3", got)
	}
	if got := g.ex.Stats().GlobalMaxInFlight; got != 3 {
		t.Errorf("the executor's global limit %d after both reloads, want the newer file's 3", got)
	}
}
