package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// SIGTERM stops a gateway still waiting for its config file from a pipe
// (--config /dev/stdin, a named pipe), which has nothing to drain: the
// signal, caught from the start for the drain, was held for a gateway
// that did not exist yet, and the process went on waiting for the file,
// stopped only by a second signal a second later (exit 1), or by the
// file coming.
func TestGatewayWaitingForItsFileStopsOnSIGTERM(t *testing.T) {
	dir := t.TempDir()
	bin := build(t, dir)
	pipe := filepath.Join(dir, "gateway.yaml")
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "gateway", "--config", pipe)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// The open for writing returns once the gateway has opened the pipe
	// to read: from then on it waits for the file, its signals caught.
	w, err := os.OpenFile(pipe, os.O_WRONLY, 0)
	if err != nil {
		cmd.Process.Kill()
		t.Fatal(err)
	}
	defer w.Close()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("after SIGTERM: %v; want exit 0, nothing to drain\n%s", err, stderr.String())
		}
		if !strings.Contains(stderr.String(), "stopped before the config file was read") {
			t.Errorf("nothing said of the stop:\n%s", stderr.String())
		}
	case <-time.After(bound):
		cmd.Process.Kill()
		<-exited
		t.Fatal("the gateway went on waiting for its file after SIGTERM")
	}
}
