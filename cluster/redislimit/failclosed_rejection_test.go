package redislimit_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
	"github.com/redis/go-redis/v9"
)

// TestFailClosedRefusalWhateverTheRejectionPolicy: when its holder is
// down (no Redis answers), a task that needs a permit the holder has no lease for is refused
// under FailClosed: it completes Rejected, its error matching both
// ErrUnavailable and executor.ErrRejected, and it never runs, whatever the
// executor's rejection policy (CallerRuns would run it on the caller,
// outside the cluster limit).
func TestFailClosedRefusalWhateverTheRejectionPolicy(t *testing.T) {
	for _, rp := range []policy.RejectionPolicy{policy.Abort, policy.Discard, policy.CallerRuns, policy.DiscardOldest} {
		t.Run(rp.String(), func(t *testing.T) {
			// A client that dials once per call: go-redis would otherwise
			// dial each call 5 times, 100ms apart.
			c := redis.NewClient(&redis.Options{Addr: deadAddr(t), MaxRetries: -1, Protocol: 2,
				DialerRetries: 1, DialerRetryTimeout: time.Millisecond})
			t.Cleanup(func() { c.Close() })
			h, err := redislimit.New(c, append([]redislimit.Option{redislimit.WithPrefix("t:" + t.Name()),
				redislimit.WithPollInterval(testPoll)}, manualRenewals()...)...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { h.Close() })
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4), policy.WithRejectionPolicy(rp)},
				h.Groups(10), nil)
			var ran atomic.Bool
			r, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) {
				ran.Store(true)
				return 0, nil
			}})
			if err != nil {
				if !errors.Is(err, redislimit.ErrUnavailable) || !errors.Is(err, executor.ErrRejected) {
					t.Fatalf("Submit: %v; want an error matching ErrUnavailable and executor.ErrRejected", err)
				}
			} else {
				res, werr := r.Wait(ctxTimeout(t, 10*time.Second))
				if werr != nil || res.Status != executor.Rejected || !errors.Is(res.Err, redislimit.ErrUnavailable) ||
					!errors.Is(res.Err, executor.ErrRejected) {
					t.Fatalf("the task: %v %v (%v); want Rejected, matching ErrUnavailable and executor.ErrRejected",
						res.Status, res.Err, werr)
				}
			}
			if ran.Load() {
				t.Fatal("the refused task ran")
			}
			if s := h.Stats(); s.Mode != redislimit.ModeDown || s.Rejected != 1 {
				t.Fatalf("stats %+v; want the holder down, one task rejected", s)
			}
		})
	}
}

// deadAddr is a loopback address that refuses connections for as long as
// the test runs: a socket bound to its port that never listens holds it,
// so that every call to it fails at once and no other socket can take the
// port. The port of a listener closed again was free for anyone: a
// redis-server that another test, run at the same time, started on it
// (redistest picks its ports so) answered for the dead holder, which was
// then not down.
func deadAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	syscall.CloseOnExec(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}

// TestDeadAddrStaysDead: a server started after deadAddr returned, as one
// of a test run at the same time could be, cannot take its port, and a
// dial to it is refused.
func TestDeadAddrStaysDead(t *testing.T) {
	addr := deadAddr(t)
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		t.Fatalf("a server could listen on the dead address %s", addr)
	}
	if c, err := net.DialTimeout("tcp", addr, 10*time.Second); err == nil {
		c.Close()
		t.Fatalf("a dial to the dead address %s was answered", addr)
	}
}
