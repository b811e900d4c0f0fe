package redislimit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/cluster/redislimit/redistest"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// TestRedisRestartedMidRun kills Redis under load and starts it again,
// empty, on the same port, once per failure policy. Throughout: no task
// runs twice and every handle completes (nothing hangs). While Redis is
// down the policy is applied and visible in Stats and events: FailClosed
// refuses with ErrUnavailable and never exceeds the limit; FailOpen runs
// tasks on fallback permits. Running tasks lose their leases. When Redis is
// back the limiter recovers: tasks run on leases again, with fencing tokens
// greater than before the restart.
func TestRedisRestartedMidRun(t *testing.T) {
	for _, pol := range []redislimit.FailurePolicy{redislimit.FailClosed, redislimit.FailOpen} {
		t.Run(pol.String(), func(t *testing.T) { testRestart(t, pol) })
	}
}

func testRestart(t *testing.T, pol redislimit.FailurePolicy) {
	srv := redistest.Start(t)
	const limit = 4
	var evMu sync.Mutex
	evs := map[redislimit.EventKind]int{}
	h := newHolder(t, srv.Addr(), redislimit.WithFailurePolicy(pol), redislimit.WithListener(func(e redislimit.Event) {
		evMu.Lock()
		if e.Kind == redislimit.EventFallback || e.Kind == redislimit.EventRejected {
			evs[e.Kind] += e.Count
		} else {
			evs[e.Kind]++
		}
		evMu.Unlock()
	}))
	// The local limit is above the cluster limit, so that the overLimit
	// check below can fail: only the cluster permits hold it.
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(2 * limit), policy.WithQueueTimeout(2 * time.Second)},
		h.Groups(limit), nil)

	var running, overLimit atomic.Int32
	var ranTwice atomic.Bool
	var phase atomic.Int32 // 0 before the outage, 1 during, 2 after recovery
	var maxTokBefore, minTokAfter atomic.Int64
	minTokAfter.Store(1 << 62)
	var leaseLost, unavailable, withToken [3]atomic.Int32
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var submitted, completed atomic.Int64
	for s := range 2 * limit { // more submitters than the cluster limit: it, not they, bounds what runs
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ph := phase.Load()
				var ran atomic.Int32
				hd, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", ID: fmt.Sprint(s, "-", i), Fn: func(ctx context.Context) (int, error) {
					if ran.Add(1) > 1 {
						ranTwice.Store(true)
					}
					if n := running.Add(1); n > limit && pol == redislimit.FailClosed {
						overLimit.Store(n)
					}
					defer running.Add(-1)
					if tok, ok := redislimit.FencingToken(ctx); ok {
						withToken[ph].Add(1)
						switch ph {
						case 0:
							for m := maxTokBefore.Load(); tok > m && !maxTokBefore.CompareAndSwap(m, tok); m = maxTokBefore.Load() {
							}
						case 2:
							for m := minTokAfter.Load(); tok < m && !minTokAfter.CompareAndSwap(m, tok); m = minTokAfter.Load() {
							}
						}
					}
					select {
					case <-time.After(20 * time.Millisecond):
					case <-ctx.Done():
						if errors.Is(context.Cause(ctx), redislimit.ErrLeaseLost) {
							leaseLost[ph].Add(1)
						}
						return 0, ctx.Err()
					}
					return 0, nil
				}})
				submitted.Add(1)
				if errors.Is(err, redislimit.ErrUnavailable) {
					unavailable[ph].Add(1)
				}
				r, werr := hd.Wait(ctxTimeout(t, time.Minute))
				if werr != nil {
					t.Errorf("a handle never completed (%v)", werr)
					return
				}
				if errors.Is(r.Err, redislimit.ErrUnavailable) && err == nil {
					unavailable[ph].Add(1)
				}
				completed.Add(1)
				time.Sleep(time.Millisecond)
			}
		}()
	}
	eventually(t, "tasks run on leases before the outage", 30*time.Second, func() bool { return withToken[0].Load() > 20 })
	srv.Stop()
	phase.Store(1)
	eventually(t, "the holder notices the outage", 30*time.Second, func() bool { return h.Stats().Mode == redislimit.ModeDown })
	eventually(t, "the failure policy applies", 30*time.Second, func() bool {
		if pol == redislimit.FailClosed {
			return unavailable[1].Load() > 5
		}
		return h.Stats().Fallbacks > 20
	})
	// Redis restarts empty: were it back while this holder still trusted
	// leases from before, it would lease the whole limit again on top of
	// them (an exception FailClosed documents). Restart it once they are
	// all lost here.
	eventually(t, "the leases from before the outage are lost here", 30*time.Second, func() bool { return h.Stats().Leases == 0 })
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the holder recovers", 30*time.Second, func() bool { return h.Stats().Mode == redislimit.ModeUp })
	phase.Store(2)
	eventually(t, "tasks run on leases after recovery", 30*time.Second, func() bool { return withToken[2].Load() > 20 })
	close(stop)
	wg.Wait()

	s := h.Stats()
	evMu.Lock()
	defer evMu.Unlock()
	t.Logf("%v: stats %+v; events %v; lost-lease cancels %d; refusals during outage %d",
		pol, s, evs, leaseLost[0].Load()+leaseLost[1].Load(), unavailable[1].Load())
	switch {
	case ranTwice.Load():
		t.Fatal("a task ran twice")
	case submitted.Load() != completed.Load():
		t.Fatalf("%d submitted, %d completed", submitted.Load(), completed.Load())
	case overLimit.Load() != 0:
		t.Fatalf("fail-closed: %d running over the limit %d", overLimit.Load(), limit)
	case s.Outages < 1 || evs[redislimit.EventUnavailable] < 1 || evs[redislimit.EventRecovered] < 1:
		t.Fatalf("the outage and the recovery are not both in stats and events")
	case s.LeasesLost < 1 || evs[redislimit.EventLeaseLost] < 1:
		t.Fatal("no lease was lost although Redis lost every lease")
	case minTokAfter.Load() <= maxTokBefore.Load():
		t.Fatalf("token %d after the restart is not greater than %d before", minTokAfter.Load(), maxTokBefore.Load())
	}
	if pol == redislimit.FailClosed {
		if s.Fallbacks != 0 || uint64(evs[redislimit.EventRejected]) > s.Rejected || s.Rejected == 0 {
			t.Fatalf("fail-closed: fallbacks %d, rejected %d, rejected in events %d", s.Fallbacks, s.Rejected, evs[redislimit.EventRejected])
		}
	} else {
		if s.Rejected != 0 || unavailable[1].Load() != 0 || s.Fallbacks == 0 || uint64(evs[redislimit.EventFallback]) > s.Fallbacks {
			t.Fatalf("fail-open: rejected %d, fallbacks %d, fallbacks in events %d", s.Rejected, s.Fallbacks, evs[redislimit.EventFallback])
		}
	}
}
