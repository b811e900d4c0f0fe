package redislimit_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/cluster/redislimit/redistest"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
	"github.com/redis/go-redis/v9"
)

// TestLimitHoldsThroughLostRepliesAndStalls runs three executors, each with
// a holder of its own, under load while Redis forgets its scripts (SCRIPT
// FLUSH: NOSCRIPT), drops every client's connection (CLIENT KILL: replies
// lost after Redis ran the calls, the subscriptions too) or stalls past the
// op timeout (SIGSTOP: calls abandoned that reach Redis later). The
// holders' clients retry as go-redis does by default, sending again a
// pipeline whose replies were lost. Sampled from inside the tasks, the
// permits running per group and in all never exceed the limits; every
// task completes (run, or refused by FailClosed during an outage); and
// once the holders are closed Redis holds no lease, no leased slot and no
// waiting record.
func TestLimitHoldsThroughLostRepliesAndStalls(t *testing.T) {
	srv := redistest.Start(t)
	addr := srv.Addr()
	const (
		groups   = 3
		perGroup = 2
		global   = 4
		tasks    = 300 // per submitter
	)
	var holders []*redislimit.Holder
	var exs []*executor.Executor
	for range 3 {
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: 3, Protocol: 2,
			ReadTimeout: time.Second, WriteTimeout: time.Second})
		t.Cleanup(func() { c.Close() })
		h, err := redislimit.New(c, redislimit.WithPrefix("t:"+t.Name()), redislimit.WithLeaseTTL(5*time.Second),
			redislimit.WithRenewInterval(500*time.Millisecond), redislimit.WithPollInterval(testPoll),
			redislimit.WithOpTimeout(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		holders = append(holders, h)
		exs = append(exs, newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(perGroup)},
			h.Groups(perGroup), h.Global(global)))
	}

	stop, chaosDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(chaosDone)
		c := newClient(t, addr)
		r := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(20+r.IntN(40)) * time.Millisecond):
			}
			switch r.IntN(4) {
			case 0:
				c.ScriptFlush(bg)
			case 1:
				c.Do(bg, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
			case 2:
				c.Do(bg, "CLIENT", "KILL", "TYPE", "pubsub")
			case 3:
				if err := srv.Pause(); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(time.Duration(50+r.IntN(200)) * time.Millisecond)
				if err := srv.Resume(); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()

	var running [groups]atomic.Int32
	var total atomic.Int32
	var violation atomic.Value
	var ran, refused atomic.Int64
	var wg sync.WaitGroup
	for s := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(s), 7))
			var hs []*executor.Handle[int]
			for range tasks {
				gi, w := r.IntN(groups), int32(1+r.IntN(2))
				pause := time.Duration(r.IntN(2000)) * time.Microsecond
				hd, _ := executor.Submit(exs[r.IntN(3)], bg, executor.Task[int]{Group: fmt.Sprint("g", gi), Weight: int(w),
					Fn: func(ctx context.Context) (int, error) {
						if n := running[gi].Add(w); n > perGroup {
							violation.Store(fmt.Sprintf("group g%d: %d permits running across the executors, limit %d", gi, n, perGroup))
						}
						if n := total.Add(w); n > global {
							violation.Store(fmt.Sprintf("%d permits running across the executors, global limit %d", n, global))
						}
						defer total.Add(-w)
						defer running[gi].Add(-w)
						time.Sleep(pause)
						return 1, nil
					}})
				hs = append(hs, hd)
			}
			for _, hd := range hs {
				switch _, err := hd.Wait(ctxTimeout(t, time.Minute)); {
				case err == nil:
					ran.Add(1)
				case errors.Is(err, redislimit.ErrUnavailable):
					refused.Add(1) // FailClosed, while a holder was down
				default:
					violation.Store("a task did not run: " + err.Error())
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-chaosDone
	if v := violation.Load(); v != nil {
		t.Fatal(v)
	}
	t.Logf("%d tasks ran, %d refused during outages", ran.Load(), refused.Load())
	if ran.Load() < tasks {
		t.Fatalf("only %d tasks ran", ran.Load())
	}

	for _, ex := range exs {
		ex.Close()
	}
	for _, h := range holders {
		if err := h.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	prefix := "t:" + t.Name()
	checkNoLeases(t, addr, prefix)
	c := newClient(t, addr)
	for _, pattern := range []string{":*:b", ":*:w"} {
		keys, err := c.Keys(bg, prefix+pattern).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			var n int64
			if pattern == ":*:b" {
				n, err = c.BitCount(bg, k, nil).Result()
			} else {
				n, err = c.ZCard(bg, k).Result()
			}
			if err != nil || n != 0 {
				t.Errorf("%s after Close: %d slots leased or holders waiting (%v)", k, n, err)
			}
		}
	}
}
