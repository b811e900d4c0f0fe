package executor

import (
	"sync"
	"testing"
	"time"
)

// hangGuard bounds a wait for something the executor must do, so that a
// test whose rule breaks fails, naming what did not happen, rather than
// hanging until the test binary's timeout. Not a timing assertion: it is
// far above any such wait on a loaded machine. (The external tests have
// their own, in helpers_test.go.)
const hangGuard = 30 * time.Second

// recv returns what c yields, failing t if nothing comes within hangGuard:
// what says what did not happen then.
func recv[T any](t testing.TB, c <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(hangGuard)
	defer timer.Stop()
	select {
	case v := <-c:
		return v
	case <-timer.C:
		t.Fatalf("%s: not within %v", what, hangGuard)
		panic("unreachable")
	}
}

// waitAll waits for wg, failing t if it is not done within hangGuard: what
// says what did not happen then.
func waitAll(t testing.TB, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	recv(t, done, what)
}
