package main

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// startWriter records what is written and says when the demo has started.
type startWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	started chan struct{}
	once    sync.Once
}

func (w *startWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), "gateway on http://") {
		w.once.Do(func() { close(w.started) })
	}
	return len(p), nil
}

// A negative --duration is a usage error naming the flag and its value (exit
// 2): it must not start the demo to run until interrupted, as 0 does.
func TestNegativeDurationIsAUsageError(t *testing.T) {
	out := &startWriter{started: make(chan struct{})}
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run([]string{"gateway", "--demo", "--duration", "-1s"}, out, &errb) }()
	select {
	case code := <-done:
		if code != 2 || !strings.Contains(errb.String(), "duration") || !strings.Contains(errb.String(), "-1s") {
			t.Fatalf("exit %d, stderr %q; want 2 and an error naming --duration and -1s", code, errb.String())
		}
	case <-out.started:
		// Stop the demo the way a user would.
		syscall.Kill(os.Getpid(), syscall.SIGINT)
		<-done
		t.Fatal("--duration -1s started the demo, to run until interrupted")
	}
}
