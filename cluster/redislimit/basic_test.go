package redislimit_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/cluster/redislimit/redistest"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

func TestTasksRunUnderTheClusterLimitWithTokens(t *testing.T) {
	addr := redistest.Shared(t)
	h := newHolder(t, addr)
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(10)}, h.Groups(3), nil)
	var running, peak atomic.Int32
	var mu sync.Mutex
	tokens := map[int64]bool{}
	var hs []*executor.Handle[int64]
	for range 30 {
		hd, err := executor.Submit(ex, bg, executor.Task[int64]{Group: "a", Fn: func(ctx context.Context) (int64, error) {
			n := running.Add(1)
			defer running.Add(-1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			tok, ok := redislimit.FencingToken(ctx)
			if !ok {
				return 0, errors.New("no fencing token in the task context")
			}
			mu.Lock()
			tokens[tok] = true
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
			return tok, nil
		}})
		if err != nil {
			t.Fatalf("Submit: %v", err)
		}
		hs = append(hs, hd)
	}
	for _, hd := range hs {
		r, err := hd.Wait(ctxTimeout(t, 20*time.Second))
		if err != nil || r.Status != executor.Success {
			t.Fatalf("task: %v %v %v", r.Status, r.Err, err)
		}
	}
	if p := peak.Load(); p > 3 || p < 1 {
		t.Fatalf("peak running %d, want 1..3", p)
	}
	s := h.Stats()
	if s.Acquired != 30 || s.Refills == 0 || s.Mode != redislimit.ModeUp {
		t.Fatalf("stats %+v", s)
	}
	t.Logf("stats %+v, %d distinct tokens", s, len(tokens))
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(bg, d)
	t.Cleanup(cancel)
	return ctx
}
