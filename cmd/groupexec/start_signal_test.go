package main

import (
	"bytes"
	"os/exec"
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
	cmd, exited := startOnPipe(t, (*exec.Cmd).Start)
	stderr := cmd.Stderr.(*bytes.Buffer)
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
