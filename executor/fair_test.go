package executor_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// startLog records the order in which tasks start, from inside their Fn.
type startLog struct {
	mu     sync.Mutex
	starts []start
}

type start struct {
	group  string
	weight int
}

func (l *startLog) fn(group string, weight int) func(context.Context) (int, error) {
	return func(context.Context) (int, error) {
		l.mu.Lock()
		l.starts = append(l.starts, start{group, max(weight, 1)})
		l.mu.Unlock()
		return 0, nil
	}
}

func (l *startLog) snapshot() []start {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]start(nil), l.starts...)
}

// permits sums the permits each group started in starts.
func permits(starts []start) map[string]int {
	m := map[string]int{}
	for _, s := range starts {
		m[s.group] += s.weight
	}
	return m
}

// hold starts a task of weight w in group "blocker" that holds its permits
// until the returned function is called, so that what is submitted meanwhile
// waits: the executor is saturated before anything else starts.
func hold(t *testing.T, ex *executor.Executor, w int) (release func()) {
	t.Helper()
	g := newGate()
	submit(t, ex, executor.Task[string]{Group: "blocker", Weight: w, Fn: g.fn("blocker")})
	g.waitStarted(t, 1)
	return g.open
}

func within(got, want, tol float64) bool { return math.Abs(got/want-1) <= tol }

// TestSharesThreeToOne: two groups with deep backlogs and shares 3:1 are
// served 3:1 in permits, whether or not their own concurrency limit binds.
func TestSharesThreeToOne(t *testing.T) {
	for _, conc := range []int{1, 8} {
		t.Run(fmt.Sprint("conc", conc), func(t *testing.T) {
			ex := newExec(t, []policy.Option{
				policy.WithGlobalMaxInFlight(1),
				policy.WithDefaultMaxConcurrency(conc),
				policy.WithDefaultMaxInFlight(policy.Unlimited),
				policy.WithGroupShare("a", 3),
			})
			release := hold(t, ex, 1)
			var log startLog
			var hs []*executor.Handle[int]
			var f executor.Fairness
			for i := range 11_000 {
				grp := "a"
				if i%11 >= 8 { // 8,000 for a, 3,000 for b, interleaved
					grp = "b"
				}
				fn := log.fn(grp, 1)
				if i == 5000 { // starts near start 4,850, while both groups wait
					next := fn
					fn = func(ctx context.Context) (int, error) {
						f = ex.Stats().Fairness // read after Wait below
						return next(ctx)
					}
				}
				hs = append(hs, submit(t, ex, executor.Task[int]{Group: grp, Fn: fn}))
			}
			release()
			for _, h := range hs {
				wait(t, h)
			}
			got := permits(log.snapshot()[:10_000])
			if r := float64(got["a"]) / float64(got["b"]); !within(r, 3, 0.05) {
				t.Errorf("first 10,000 starts: a %d, b %d permits (%.3f:1), want 3:1 within 5%%", got["a"], got["b"], r)
			}
			a, b := groupStats(t, ex, "a"), groupStats(t, ex, "b")
			if a.Share != 3 || b.Share != 1 || a.ServedPermits != 8000 || a.Started != 8000 || b.ServedPermits != 3000 {
				t.Errorf("group stats a %+v, b %+v", a, b)
			}
			if f.Windows == 0 || f.Groups != 2 || f.Index < 0.99 || f.Starts < 256 {
				t.Errorf("fairness %+v, want a window over both groups with index >= 0.99", f)
			}
		})
	}
}

// TestSharesCountPermitsNotTasks: with equal shares, a group of weight-4
// tasks and a group of weight-1 tasks are served equal permits.
func TestSharesCountPermitsNotTasks(t *testing.T) {
	ex := newExec(t, []policy.Option{
		policy.WithGlobalMaxInFlight(4),
		policy.WithDefaultMaxConcurrency(4),
		policy.WithDefaultMaxInFlight(policy.Unlimited),
	})
	release := hold(t, ex, 4)
	var log startLog
	var hs []*executor.Handle[int]
	for i := range 12_500 {
		grp, w := "light", 1
		if i%5 == 0 {
			grp, w = "heavy", 4
		}
		hs = append(hs, submit(t, ex, executor.Task[int]{Group: grp, Weight: w, Fn: log.fn(grp, w)}))
	}
	release()
	for _, h := range hs {
		wait(t, h)
	}
	got := permits(log.snapshot()[:10_000])
	if !within(float64(got["heavy"]), float64(got["light"]), 0.05) {
		t.Errorf("first 10,000 starts: heavy %d, light %d permits, want equal within 5%%", got["heavy"], got["light"])
	}
}

// TestReturningGroupGetsItsShareAtOnce: a group that went idle while another
// kept a backlog gets its share from its first turn back, and no more: it
// saved no credit while idle.
func TestReturningGroupGetsItsShareAtOnce(t *testing.T) {
	ex := newExec(t, []policy.Option{
		policy.WithGlobalMaxInFlight(1),
		policy.WithDefaultMaxInFlight(policy.Unlimited),
		policy.WithGroupShare("b", 2),
	})
	release := hold(t, ex, 1)
	var log startLog
	paused, resume := make(chan struct{}), make(chan struct{})
	var hs []*executor.Handle[int]
	for i := range 200 {
		fn := log.fn("a", 1)
		if i == 100 { // holds the global permit while b comes back
			next := fn
			fn = func(ctx context.Context) (int, error) {
				next(ctx)
				close(paused)
				<-resume
				return 0, nil
			}
		}
		hs = append(hs, submit(t, ex, executor.Task[int]{Group: "a", Fn: fn}))
	}
	for range 20 {
		hs = append(hs, submit(t, ex, executor.Task[int]{Group: "b", Fn: log.fn("b", 1)}))
	}
	release()
	<-paused
	before := len(log.snapshot())
	if s := groupStats(t, ex, "b"); s.Waiting != 0 || s.Started != 20 {
		t.Fatalf("b did not go idle before coming back: %+v", s)
	}
	for range 60 {
		hs = append(hs, submit(t, ex, executor.Task[int]{Group: "b", Fn: log.fn("b", 1)}))
	}
	close(resume)
	for _, h := range hs {
		wait(t, h)
	}
	after := log.snapshot()[before:]
	nb := 0
	for n, s := range after[:90] { // a still has 99 waiting, b 60: both backlogged
		if s.group == "b" {
			nb++
		}
		want := 2 * float64(n+1) / 3
		if math.Abs(float64(nb)-want) > 1 {
			t.Fatalf("after %d starts since b came back, b had %d, want %.1f (share 2 of 3) within 1: %v", n+1, nb, want, after[:n+1])
		}
	}
}

// TestLightGroupBesideHeavyBacklog: with equal shares and one global permit,
// the k-th task of a light group starts within the first 2k+2 starts, however
// deep the heavy group's backlog.
func TestLightGroupBesideHeavyBacklog(t *testing.T) {
	const backlog = 100_000
	ex := newExec(t, []policy.Option{
		policy.WithGlobalMaxInFlight(1),
		policy.WithDefaultMaxInFlight(policy.Unlimited),
	})
	release := hold(t, ex, 1)
	var log startLog
	heavy := make([]*executor.Handle[int], 0, backlog)
	for range backlog {
		heavy = append(heavy, submit(t, ex, executor.Task[int]{Group: "heavy", Fn: log.fn("heavy", 1)}))
	}
	var light []*executor.Handle[int]
	for range 10 {
		light = append(light, submit(t, ex, executor.Task[int]{Group: "light", Fn: log.fn("light", 1)}))
	}
	release()
	for _, h := range light {
		wait(t, h)
	}
	for _, h := range heavy {
		h.Cancel()
	}
	k := 0
	for i, s := range log.snapshot() {
		if s.group != "light" {
			continue
		}
		k++
		if i+1 > 2*k+2 {
			t.Errorf("light task %d was start %d, want within %d", k, i+1, 2*k+2)
		}
	}
	if k != 10 {
		t.Errorf("%d light tasks started", k)
	}
}

// TestDiscardOldest: with a queue threshold of 3, five waiting tasks leave
// the last three waiting; the first two complete Rejected, displaced, in
// order, without running. Another group is untouched.
func TestDiscardOldest(t *testing.T) {
	rec := &recorder{}
	ex := newExec(t, []policy.Option{
		policy.WithDefaultQueueThreshold(3),
		policy.WithRejectionPolicy(policy.DiscardOldest),
	}, executor.WithListener(rec))
	g := newGate()
	defer g.open()
	submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("blocker")})
	submit(t, ex, executor.Task[string]{Group: "other", Fn: g.fn("other-blocker")})
	g.waitStarted(t, 2)
	other := submit(t, ex, executor.Task[string]{Group: "other", ID: "other", Fn: g.fn("other")})
	var log startLog
	var hs []*executor.Handle[int]
	for i := range 5 {
		h, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", ID: fmt.Sprint("t", i), Fn: log.fn(fmt.Sprint("t", i), 1)})
		if err != nil {
			t.Fatalf("Submit t%d: %v, want nil under DiscardOldest", i, err)
		}
		hs = append(hs, h)
		if i >= 3 { // t(i-3) was displaced by this Submit, and no other
			if !isDone(hs[i-3]) {
				t.Fatalf("t%d not displaced by t%d", i-3, i)
			}
			if i == 3 && isDone(hs[1]) {
				t.Fatal("t1 displaced before its turn")
			}
		}
	}
	for _, h := range hs[:2] {
		r := wait(t, h)
		var re *executor.RejectedError
		if r.Status != executor.Rejected || !errors.Is(r.Err, executor.ErrDisplaced) || !errors.Is(r.Err, executor.ErrRejected) ||
			!errors.As(r.Err, &re) || re.Limit != executor.LimitGroupQueue {
			t.Errorf("%s: %+v, want Rejected with ErrDisplaced", h.ID(), r)
		}
		if got := rec.of(h.ID()); fmt.Sprint(got) != "[submitted rejected]" {
			t.Errorf("%s: listener saw %v", h.ID(), got)
		}
	}
	if s := groupStats(t, ex, "other"); s.Waiting != 1 || isDone(other) {
		t.Errorf("other group touched: %+v", s)
	}
	if s := groupStats(t, ex, "g"); s.Waiting != 3 || s.Rejected != 2 {
		t.Errorf("group stats %+v", s)
	}
	g.open()
	for _, h := range hs[2:] {
		if r := wait(t, h); r.Status != executor.Success {
			t.Errorf("%s: %+v", h.ID(), r)
		}
	}
	if got := fmt.Sprint(log.snapshot()); got != "[{t2 1} {t3 1} {t4 1}]" {
		t.Errorf("ran %s, want t2 t3 t4 in order and nothing else", got)
	}
}

// TestDiscardOldestOtherRefusals: under DiscardOldest only a full group
// queue displaces; a full bulkhead (with tasks waiting or not) and the global
// queue threshold discard the new task and displace nothing.
func TestDiscardOldestOtherRefusals(t *testing.T) {
	ex := newExec(t, []policy.Option{
		policy.WithDefaultMaxInFlight(4),
		policy.WithDefaultMaxConcurrency(2),
		policy.WithGroupMaxConcurrency("h", 4),
		policy.WithGlobalQueueThreshold(4),
		policy.WithRejectionPolicy(policy.DiscardOldest),
	})
	g := newGate()
	defer g.open()
	submit(t, ex, executor.Task[string]{Group: "g", Weight: 2, Fn: g.fn("running")})
	g.waitStarted(t, 1)
	w1 := submit(t, ex, executor.Task[string]{Group: "g", ID: "w1", Fn: g.fn("w1")})
	w2 := submit(t, ex, executor.Task[string]{Group: "g", ID: "w2", Fn: g.fn("w2")})
	// g's bulkhead (4 permits) is full: 2 running + 2 waiting.
	heavy, err := executor.Submit(ex, bg, executor.Task[string]{Group: "g", ID: "heavy", Weight: 2, Fn: g.fn("heavy")})
	var re *executor.RejectedError
	if r := wait(t, heavy); err != nil || r.Status != executor.Rejected || !errors.As(r.Err, &re) ||
		re.Limit != executor.LimitGroupInFlight || errors.Is(r.Err, executor.ErrDisplaced) {
		t.Fatalf("heavy: err %v, %+v; want discarded by the bulkhead", err, r)
	}
	if isDone(w1) || isDone(w2) {
		t.Fatal("a full bulkhead displaced waiting tasks")
	}
	// Group h: its bulkhead is full of running tasks; nothing to displace.
	submit(t, ex, executor.Task[string]{Group: "h", Weight: 2, Fn: g.fn("h-running")})
	submit(t, ex, executor.Task[string]{Group: "h", Weight: 2, Fn: g.fn("h-running")})
	g.waitStarted(t, 2)
	x, err := executor.Submit(ex, bg, executor.Task[string]{Group: "h", Fn: g.fn("never")})
	if r := wait(t, x); err != nil || r.Status != executor.Rejected || errors.Is(r.Err, executor.ErrDisplaced) {
		t.Errorf("h: err %v, %+v; want discarded", err, r)
	}
	// The global queue threshold (4; w1 and w2 wait already): discarded,
	// nothing displaced.
	for i := range 2 {
		submit(t, ex, executor.Task[string]{Group: fmt.Sprint("q", i), Weight: 2, Fn: g.fn("q-running")})
	}
	g.waitStarted(t, 2)
	for i := range 2 {
		submit(t, ex, executor.Task[string]{Group: fmt.Sprint("q", i), Fn: g.fn("q")})
	}
	y, err := executor.Submit(ex, bg, executor.Task[string]{Group: "q0", Fn: g.fn("never")})
	if r := wait(t, y); err != nil || r.Status != executor.Rejected || !errors.As(r.Err, &re) || re.Limit != executor.LimitGlobalQueue {
		t.Errorf("global queue: err %v, %+v; want discarded", err, r)
	}
	if s := ex.Stats(); s.Waiting != 4 {
		t.Errorf("waiting %d, want 4: nothing displaced by a global refusal", s.Waiting)
	}
}

// TestRandomizedShares: many groups with random shares and weights, waiting
// tasks cancelled and groups evicted while they run; every group that stayed
// backlogged is served permits within 10% of its share, and the invariants
// hold throughout (newExec checks them again at the end).
func TestRandomizedShares(t *testing.T) {
	const (
		groups = 8
		global = 6
		span   = 20_000 // permits analysed
	)
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 7))
	shares := make([]int, groups)
	sum := 0
	popts := []policy.Option{
		policy.WithGlobalMaxInFlight(global),
		policy.WithDefaultMaxConcurrency(global),
		policy.WithDefaultMaxInFlight(policy.Unlimited),
	}
	for i := range shares {
		shares[i] = 1 + r.IntN(4)
		sum += shares[i]
		popts = append(popts, policy.WithGroupShare(fmt.Sprint("g", i), shares[i]))
	}
	ex := newExec(t, popts, executor.WithMaxIdleGroups(2))
	release := hold(t, ex, global)
	var log startLog
	var hs []*executor.Handle[int]
	for i := range groups {
		grp := fmt.Sprint("g", i)
		// Enough for 1.5 times the group's part of span, plus what is cancelled.
		for p := 0; p < 2*span*shares[i]/sum; {
			w := 1 + r.IntN(3)
			hs = append(hs, submit(t, ex, executor.Task[int]{Group: grp, Weight: w, Fn: log.fn(grp, w)}))
			p += w
		}
	}
	for range len(hs) / 10 {
		hs[r.IntN(len(hs))].Cancel()
	}
	stop := make(chan struct{})
	done := make(chan string)
	go func() { // cancellations, evictions and checks while tasks run
		r := rand.New(rand.NewPCG(seed, 8))
		msg := ""
		// As many cancels again, and no more: however fast this loop
		// runs next to the dispatch, every group keeps more than its
		// part of span.
		cancels := len(hs) / 10
		for {
			select {
			case <-stop:
				done <- msg
				return
			default:
			}
			switch r.IntN(3) {
			case 0:
				if cancels > 0 {
					cancels--
					hs[r.IntN(len(hs))].Cancel()
				}
			case 1:
				ex.EvictGroup(fmt.Sprint("g", r.IntN(groups)))
			default:
				if m := ex.CheckInvariants(); m != "" && msg == "" {
					msg = m
				}
			}
		}
	}()
	release()
	for _, h := range hs {
		wait(t, h)
	}
	close(stop)
	if msg := <-done; msg != "" {
		t.Fatalf("invariant broken while running: %s", msg)
	}
	// Analyse the starts until the first group ran out of tasks.
	starts := log.snapshot()
	last := map[string]int{}
	for i, s := range starts {
		last[s.group] = i
	}
	end := len(starts)
	for _, i := range last {
		end = min(end, i)
	}
	got := permits(starts[:end])
	total := 0
	for _, p := range got {
		total += p
	}
	if total < span {
		t.Fatalf("only %d permits served while every group was backlogged, want >= %d", total, span)
	}
	for i, sh := range shares {
		grp := fmt.Sprint("g", i)
		want := float64(total) * float64(sh) / float64(sum)
		if !within(float64(got[grp]), want, 0.10) {
			t.Errorf("%s (share %d): %d permits, want %.0f within 10%% (shares %v)", grp, sh, got[grp], want, shares)
		}
	}
}
