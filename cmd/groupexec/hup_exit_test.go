package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// A SIGHUP storm (a config sync signalling each change) going on while the
// gateway drains and exits leaves its exit status 0: SIGHUP was released to
// its default action as the gateway stopped, and one arriving between then
// and the exit ended the process with it (status 129), in most runs.
// Each of ten rounds signals from before the SIGTERM until the process is gone.
func TestSIGHUPStormThroughTheExit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	bin := build(t, dir)
	be := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer be.Close()
	cfgPath := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nbackends: [%s]\n", be.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	for round := range 10 {
		p := startBinary(t, bin, cfgPath)
		stopStorm := make(chan struct{})
		stormDone := make(chan struct{})
		go func() {
			defer close(stormDone)
			for {
				select {
				case <-stopStorm:
					return
				default:
				}
				p.cmd.Process.Signal(syscall.SIGHUP)
				runtime.Gosched()
			}
		}()
		p.cmd.Process.Signal(syscall.SIGTERM)
		var err error
		select {
		case err = <-p.exited:
		case <-time.After(bound):
			err = fmt.Errorf("still running %v after SIGTERM", bound)
		}
		close(stopStorm)
		<-stormDone
		if err != nil {
			t.Fatalf("round %d: exit %v during a SIGHUP storm; want 0\n%s", round, err, p.logs())
		}
	}
}
