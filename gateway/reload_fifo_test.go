package gateway_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/groupexec/groupexec/gateway"
	"github.com/groupexec/groupexec/gateway/config"
)

// A reload of a config path that has become a named pipe is refused at
// once, naming the path: the open waited for a writer that never came,
// under the reloads' lock, so that every reload after it, and Close at the
// end of the drain, waited for good. POST /reload answers 400, and the
// gateway closes.
func TestReloadOfANamedPipeIsRefusedAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	gw := build(t, "http://127.0.0.1:1", "backends: [%s]\n", gateway.WithConfigFile(path))
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	before := gw.Config()
	reloaded := make(chan error, 1)
	go func() { reloaded <- gw.ReloadFile() }()
	select {
	case err := <-reloaded:
		if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), path+" is not a regular file (a named pipe)") {
			t.Errorf("ReloadFile of a named pipe: %v; want an invalid config naming the path and what it is", err)
		}
	case <-time.After(bound):
		// Let the reload go, so that the test ends.
		if w, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		<-reloaded
		t.Fatal("ReloadFile of a named pipe waited for a writer")
	}
	rec := httptest.NewRecorder()
	gw.AdminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/reload", nil))
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "not a regular file") {
		t.Errorf("POST /reload of a named pipe: %d %q; want 400 naming it", rec.Code, rec.Body)
	}
	if gw.Config() != before {
		t.Error("the refused reload changed the config in force")
	}
	if err := gw.Close(); err != nil {
		t.Fatal(err)
	}
}

// The path is read anew on every reload, through a symlink too: a
// Kubernetes ConfigMap mounts the file as a symlink through a directory
// symlink that an update swaps at once. A reload after the swap applies
// the new file.
func TestReloadFollowsASwappedSymlink(t *testing.T) {
	dir := t.TempDir()
	for name, limit := range map[string]string{"v1": "5", "v2": "7"} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
		body := "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nbackends: [http://127.0.0.1:1]\nlimits: {global_max_in_flight: " + limit + "}\n"
		if err := os.WriteFile(filepath.Join(dir, name, "gateway.yaml"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "..data")
	if err := os.Symlink("v1", data); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "gateway.yaml")
	if err := os.Symlink(filepath.Join("..data", "gateway.yaml"), path); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	gw := build(t, "http://127.0.0.1:1", "backends: [%s]\n", gateway.WithConfigFile(path))
	if err := gw.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	// The swap: a new symlink renamed over the old one, as kubelet does.
	if err := os.Symlink("v2", data+".tmp"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(data+".tmp", data); err != nil {
		t.Fatal(err)
	}
	if err := gw.ReloadFile(); err != nil {
		t.Fatal(err)
	}
	if got := gw.Executor().Stats().GlobalMaxInFlight; got != 7 {
		t.Errorf("global limit %d after the swap, want the new file's 7", got)
	}
	gw.Close()
}
