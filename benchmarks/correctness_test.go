package benchmarks

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// These tests run every workload helper with a short N and check that each
// peer ran every task exactly once (the count is exact after run returns,
// and does not move afterwards), within its configured global limit, so
// that no benchmark can silently run nothing.

// concProbe is a counter.onRun that records the most tasks seen running at
// once; it yields so that tasks overlap.
type concProbe struct{ cur, max atomic.Int64 }

func (p *concProbe) onRun() {
	n := p.cur.Add(1)
	for {
		m := p.max.Load()
		if n <= m || p.max.CompareAndSwap(m, n) {
			break
		}
	}
	runtime.Gosched()
	p.cur.Add(-1)
}

func testRunners(t *testing.T, peers []peerCase, limit int64) {
	for _, pc := range peers {
		t.Run(pc.name, func(t *testing.T) {
			var c counter
			var probe concProbe
			c.onRun = probe.onRun
			r, err := pc.new(&c)
			if err != nil {
				t.Fatal(err)
			}
			want := int64(0)
			for _, n := range []int{1, 1000, 2501} {
				if err := r.run(n); err != nil {
					t.Fatal(err)
				}
				want += int64(n)
				if got := c.n.Load(); got != want {
					t.Fatalf("after run(%d): %d tasks ran, want %d", n, got, want)
				}
			}
			if o, ok := r.(*oursRunner); ok && o.spawn != nil {
				if o.spawn.spawns.Load() == 0 || o.spawn.fallbacks.Load() != 0 {
					t.Errorf("ants spawn: %d spawns, %d fallbacks; want > 0 and 0", o.spawn.spawns.Load(), o.spawn.fallbacks.Load())
				}
			}
			if err := r.close(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
			if got := c.n.Load(); got != want {
				t.Fatalf("after close: %d tasks ran, want %d", got, want)
			}
			if m := probe.max.Load(); m > limit || m < 1 {
				t.Errorf("at most %d tasks ran at once, want 1..%d", m, limit)
			}
		})
	}
}

func TestFlatRunners(t *testing.T)       { testRunners(t, flatPeers, flatLimit) }
func TestGroupedRunners(t *testing.T)    { testRunners(t, groupedPeers, groupedGlobal) }
func TestSubmittersRunners(t *testing.T) { testRunners(t, submittersPeers, groupedGlobal) }

func TestGroupKeys(t *testing.T) {
	keys := groupKeys(groupedGroups)
	seen := make(map[string]bool)
	for _, k := range keys {
		seen[k] = true
	}
	if len(seen) != groupedGroups || keys[0] != "group-0000" || keys[999] != "group-0999" {
		t.Fatalf("groupKeys: %d distinct, first %q, last %q", len(seen), keys[0], keys[len(keys)-1])
	}
}

func TestWaitingCost(t *testing.T) {
	for kind, f := range memKinds {
		t.Run(kind, func(t *testing.T) {
			cost, err := f(5000) // checks that all n waited, then all ran once
			if err != nil {
				t.Fatal(err)
			}
			if cost <= 0 {
				t.Fatalf("cost %.1f bytes per waiting task, want > 0", cost)
			}
		})
	}
}

func TestWaitingCostInChild(t *testing.T) {
	cost, err := measureInChild("ours", 5000)
	if err != nil {
		t.Fatal(err)
	}
	if cost <= 0 {
		t.Fatalf("cost %.1f, want > 0", cost)
	}
}

func TestIsolationHelpers(t *testing.T) {
	const backlog = 2000
	for _, pc := range isoPeers {
		t.Run(pc.name, func(t *testing.T) {
			res, err := pc.run(backlog) // checks every hot task ran once
			if err != nil {
				t.Fatal(err)
			}
			// Hot tasks may start between opening their gate and the cold
			// submission (on a loaded machine, many), so the backlog at the
			// probe is at most the whole backlog, not exactly it.
			if res.delay <= 0 || res.backlogAtProb < 0 || res.backlogAtProb > backlog ||
				res.hotBefore < 0 || res.hotBefore > res.backlogAtProb {
				t.Fatalf("result %+v: want delay > 0, 0 <= hot started before cold <= backlog at probe <= %d", res, backlog)
			}
		})
	}
}
