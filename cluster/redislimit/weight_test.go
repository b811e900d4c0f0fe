package redislimit_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit/redistest"
	"github.com/groupexec/groupexec/executor"
)

// TryAcquire called directly (the executor never asks for fewer than one
// permit) with a weight below 1 is a bug of its caller: it is refused at
// once, with an error that names the weight, neither waiting for a block
// that no refill would ask for (0) nor panicking (a negative weight), and
// the key is served as before.
func TestTryAcquireRefusesAWeightBelowOne(t *testing.T) {
	addr := redistest.Shared(t)
	h := newHolder(t, addr)
	lg, lk := h.Global(2), h.Groups(2)
	ng, nk := attach(t, lg), attach(t, lk)
	cases := []struct {
		scope string
		try   func(n int) (executor.LimiterPermit, error)
	}{
		{"global", func(n int) (executor.LimiterPermit, error) { return lg.TryAcquire("", n) }},
		{"group", func(n int) (executor.LimiterPermit, error) { return lk.TryAcquire("g", n) }},
	}
	refused := func(when string) {
		t.Helper()
		for _, c := range cases {
			for _, n := range []int{0, -1, -3} {
				p, err := tryContained(c.try, n)
				if p != nil || !errors.Is(err, executor.ErrInvalidTask) || !strings.Contains(fmt.Sprint(err), fmt.Sprint(n)) {
					t.Errorf("%s, %s TryAcquire of weight %d: %v, %v; want no permit and an error matching executor.ErrInvalidTask that names %d",
						when, c.scope, n, p, err, n)
				}
			}
		}
	}
	refused("before any lease")
	// With a leased permit free at hand, and then once more without.
	acquire(t, lg, ng, "", 1, 5*time.Second).Release()
	acquire(t, lk, nk, "g", 1, 5*time.Second).Release()
	refused("with a permit free")
	acquire(t, lg, ng, "", 1, 5*time.Second).Release()
	acquire(t, lk, nk, "g", 1, 5*time.Second).Release()
	// The caller's bug is named first, a closed holder's refusal after it.
	h.Close()
	refused("after Close")
}

// tryContained calls try(n), turning a panic into an error.
func tryContained(try func(n int) (executor.LimiterPermit, error), n int) (p executor.LimiterPermit, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("panic: %v", r)
		}
	}()
	return try(n)
}
