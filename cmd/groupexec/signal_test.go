package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A second SIGINT or SIGTERM during a drain, sameStop or more after the
// first, stops the process at once, with exit status 1, instead of
// waiting out drain_delay and drain_timeout; the first alone drains
// (TestEndToEnd), and so does the first sent twice at once
// (TestSignalSentTwiceAtOnceDrains).
func TestSecondSignalStopsTheDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	bin := build(t, dir)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer be.Close()
	for _, second := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		cfgPath := filepath.Join(dir, "gateway.yaml")
		// A drain that would outlast the test many times over.
		os.WriteFile(cfgPath, fmt.Appendf(nil, "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nbackends: [%s]\ndrain_delay: 1h\n", be.URL), 0o600)
		p := startBinary(t, bin, cfgPath)
		p.cmd.Process.Signal(syscall.SIGTERM)
		// The drain has begun once readiness fails.
		deadline := time.Now().Add(bound)
		for {
			resp, err := http.Get(p.admin + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusServiceUnavailable {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("readyz did not fail after the first signal\n%s", p.logs())
			}
			time.Sleep(5 * time.Millisecond)
		}
		// The first signal was handled before readiness failed: sameStop
		// from here, a signal is a second one, not the first sent twice.
		time.Sleep(sameStop)
		p.cmd.Process.Signal(second)
		select {
		case err := <-p.exited:
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Errorf("second %v: exit %v, want exit status 1", second, err)
			}
			if logs := p.logs(); !strings.Contains(logs, "second signal") {
				t.Errorf("second %v: nothing said of it:\n%s", second, logs)
			}
		case <-time.After(bound):
			t.Fatalf("second %v during the drain: the process went on draining\n%s", second, p.logs())
		}
	}
}
