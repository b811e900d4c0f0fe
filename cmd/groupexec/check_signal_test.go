package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// SIGINT stops --check at once, as it stops any command with nothing to
// drain: a check reading its file from a pipe (--config /dev/stdin, a
// named pipe) that does not come was kept waiting, the first Ctrl-C taken
// for a drain that --check never runs, and only a second, a second later,
// ended it, logged as a drain cut short.
func TestCheckStopsOnFirstSIGINT(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	cmd, exited := startOnPipe(t, startWithDefaultSIGINT, "--check")
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("--check exited %v after SIGINT; want it stopped", err)
		}
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && (!ws.Signaled() || ws.Signal() != syscall.SIGINT) {
			t.Errorf("--check after SIGINT: %v; want it ended by the signal, as a command with nothing to drain is", err)
		}
	case <-time.After(bound):
		cmd.Process.Kill()
		<-exited
		t.Fatal("--check went on waiting for its file after SIGINT")
	}
}

// startWithDefaultSIGINT starts cmd with SIGINT's default action, whatever
// the test's own: a signal ignored is ignored still in the programs a
// process runs, and a test run in the background of a shell without job
// control (cmd &, as a CI script may) ignores SIGINT from its start. A
// check left so would outlive any SIGINT, rightly: an ignored SIGINT is
// the caller's choice. A signal caught is reset to its default in a
// program the process runs: catching SIGINT while cmd starts gives it the
// default action.
func startWithDefaultSIGINT(cmd *exec.Cmd) error {
	caught := make(chan os.Signal, 1)
	signal.Notify(caught, syscall.SIGINT)
	defer signal.Stop(caught)
	return cmd.Start()
}

// startOnPipe builds the command and starts it, with start, as `gateway
// --config PIPE args...`, PIPE a named pipe no one has written to, and
// returns once it has opened the pipe to read: from then on it waits for
// its file, its signals set. exited gets the command's Wait. The pipe's
// writing end is closed as the test ends.
func startOnPipe(t *testing.T, start func(*exec.Cmd) error, args ...string) (cmd *exec.Cmd, exited <-chan error) {
	t.Helper()
	dir := t.TempDir()
	bin := build(t, dir)
	pipe := filepath.Join(dir, "gateway.yaml")
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(bin, append([]string{"gateway", "--config", pipe}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := start(cmd); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// The open for writing returns once the command has opened the pipe
	// to read.
	w, err := os.OpenFile(pipe, os.O_WRONLY, 0)
	if err != nil {
		cmd.Process.Kill()
		<-done
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return cmd, done
}
