package redislimit_test

// Even shares between processes: a process that joins holders already
// using the whole limit gets its share, on ordinary keys and on a limit-1
// key, and a contended limit-1 key under a full global limit runs its
// tasks. Real redis-server, real OS processes (this test binary in mode
// "demand"), real time: the assertions are on counts, with margins of two
// and more, not on when things happen.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
	"github.com/redis/go-redis/v9"
)

// demandSpec is a "demand" process's load: its name, its tenants and their
// cluster limits, the cluster global limit (0: none), how long each task
// runs, and how many tasks each tenant keeps submitted.
type demandSpec struct {
	name    string
	tenants map[string]int
	global  int
	task    time.Duration
	depth   int
}

func (s demandSpec) String() string {
	var ts []string
	for t, l := range s.tenants {
		ts = append(ts, t+"="+strconv.Itoa(l))
	}
	slices.Sort(ts)
	return fmt.Sprintf("%s;%s;%d;%s;%d", s.name, strings.Join(ts, ","), s.global, s.task, s.depth)
}

func parseDemand(arg string) (demandSpec, error) {
	f := strings.Split(arg, ";")
	if len(f) != 5 {
		return demandSpec{}, fmt.Errorf("demand spec %q", arg)
	}
	s := demandSpec{name: f[0], tenants: map[string]int{}}
	for _, kv := range strings.Split(f[1], ",") {
		k, v, _ := strings.Cut(kv, "=")
		n, err := strconv.Atoi(v)
		if err != nil {
			return s, err
		}
		s.tenants[k] = n
	}
	var err error
	if s.global, err = strconv.Atoi(f[2]); err != nil {
		return s, err
	}
	if s.task, err = time.ParseDuration(f[3]); err != nil {
		return s, err
	}
	s.depth, err = strconv.Atoi(f[4])
	return s, err
}

// ranKey is the Redis counter of the tasks of tenant started by process.
func ranKey(prefix, tenant, process string) string {
	return prefix + ":ran:" + tenant + ":" + process
}

// demand keeps spec.depth tasks of every tenant submitted through an
// executor limited by h, each counting its start in Redis, until killed.
func demand(h *redislimit.Holder, addr, prefix, arg string) int {
	spec, err := parseDemand(arg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	// A client of its own with generous timeouts: the counts are the
	// measurement, not part of the limiter.
	pc := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 10 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, MaxRetries: -1, Protocol: 2})
	defer pc.Close()
	// The local limits are above the cluster ones: only those bind.
	p, _ := policy.New(policy.WithDefaultMaxConcurrency(4*spec.depth), policy.WithDefaultMaxInFlight(policy.Unlimited),
		policy.WithGlobalMaxInFlight(len(spec.tenants)*spec.depth*2), policy.WithQueueTimeout(time.Hour))
	opts := []executor.Option{executor.WithGroupLimiter(h.GroupsFunc(func(g string) int { return spec.tenants[g] }))}
	if spec.global > 0 {
		opts = append(opts, executor.WithGlobalLimiter(h.Global(spec.global)))
	}
	ex, err := executor.New(p, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer ex.Close()
	var wg sync.WaitGroup
	var down sync.Once
	for tenant := range spec.tenants {
		key := ranKey(prefix, tenant, spec.name)
		for range spec.depth {
			wg.Go(func() {
				for {
					hd, err := executor.Submit(ex, context.Background(), executor.Task[int]{Group: tenant, Fn: func(ctx context.Context) (int, error) {
						if err := pc.Incr(context.Background(), key).Err(); err != nil {
							fmt.Fprintln(os.Stderr, "count:", err)
							os.Exit(1)
						}
						select {
						case <-time.After(spec.task):
						case <-ctx.Done():
						}
						return 0, nil
					}})
					if errors.Is(err, redislimit.ErrUnavailable) {
						// Redis answered after the op timeout three times in
						// a row, as it does on a loaded machine, and the
						// holder is down: the demand pauses until it is back
						// up, as a service's would, rather than end and
						// leave the measurement a process short.
						down.Do(func() { fmt.Fprintln(os.Stderr, spec.name+": holder down, demand paused:", err) })
						time.Sleep(testPoll)
						continue
					}
					if err != nil {
						fmt.Fprintln(os.Stderr, "submit:", err)
						os.Exit(1)
					}
					if _, err := hd.Wait(context.Background()); err != nil {
						return
					}
				}
			})
		}
	}
	fmt.Println("READY")
	wg.Wait()
	return 0
}

// ranCounts reads the tasks started per tenant and process.
func ranCounts(t *testing.T, c *redis.Client, prefix string, tenants, processes []string) map[string]map[string]int64 {
	t.Helper()
	var keys []string
	for _, tn := range tenants {
		for _, p := range processes {
			keys = append(keys, ranKey(prefix, tn, p))
		}
	}
	vs, err := c.MGet(bg, keys...).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]int64{}
	i := 0
	for _, tn := range tenants {
		out[tn] = map[string]int64{}
		for _, p := range processes {
			if s, ok := vs[i].(string); ok {
				out[tn][p], _ = strconv.ParseInt(s, 10, 64)
			}
			i++
		}
	}
	return out
}

// window returns the tasks started per tenant and process from now until
// enough holds for the counts so far: a sample of a set size however fast
// the machine runs the tasks, where a window of a set time shrinks to a
// handful of tasks on a loaded machine and a ratio of handfuls is noise.
// It fails t if the sample takes longer than guard, a hang guard.
func window(t *testing.T, c *redis.Client, prefix string, tenants, processes []string, guard time.Duration,
	enough func(map[string]map[string]int64) bool) map[string]map[string]int64 {
	t.Helper()
	before := ranCounts(t, c, prefix, tenants, processes)
	deadline := time.Now().Add(guard)
	for {
		time.Sleep(50 * time.Millisecond) // a poll interval: the counts are compared, not the time
		w := ranCounts(t, c, prefix, tenants, processes)
		for tn, ps := range w {
			for p := range ps {
				w[tn][p] -= before[tn][p]
			}
		}
		if enough(w) {
			return w
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sample is not complete after %v: tasks started per tenant and process %v", guard, w)
		}
	}
}

// fairWindow takes up to tries windows in a row with take, and returns the
// first in which check finds nothing wrong; if none, it fails t with what
// check found in each. A share is a rate, and a process descheduled for a
// second or two (shown: 2s of SIGSTOP of the joining process leaves it 3%
// of a window) or a loaded machine's slow hand-overs spoil the window they
// fall in, and no other: a holder that keeps a process from its share
// does so in every window.
func fairWindow(t *testing.T, tries int, take func() map[string]map[string]int64,
	check func(map[string]map[string]int64) []string) map[string]map[string]int64 {
	t.Helper()
	var found []string
	for i := range tries {
		w := take()
		wrong := check(w)
		if len(wrong) == 0 {
			return w
		}
		found = append(found, fmt.Sprintf("window %d: %s", i+1, strings.Join(wrong, "; ")))
	}
	t.Fatalf("no window of %d was fair:\n%s", tries, strings.Join(found, "\n"))
	return nil
}

// TestJoiningProcessGetsItsShare: three processes keep four tenants of
// limit 5 and a tenant of limit 1 saturated (no global limit); a fourth,
// identical, joins. Within a few renew intervals it runs at least half an
// even share (1/4) of every tenant's tasks, the limit-1 tenant's included,
// in one of up to five windows in a row (fairWindow): a second or two in
// which the joining process is not run leaves it next to nothing in the
// window they fall in.
func TestJoiningProcessGetsItsShare(t *testing.T) {
	addr := startRedis(t)
	prefix := "t:" + t.Name()
	tenants := map[string]int{"t0": 5, "t1": 5, "t2": 5, "t3": 5, "k": 1}
	procs := []string{"A", "B", "C", "D"}
	spec := func(name string) string {
		return demandSpec{name: name, tenants: tenants, task: 10 * time.Millisecond, depth: 8}.String()
	}
	for _, p := range procs[:3] {
		startChild(t, "demand", addr, prefix, spec(p)).expect(t, "READY", 30*time.Second)
	}
	c := newClient(t, addr)
	time.Sleep(4 * testRenew) // the three share everything between them
	startChild(t, "demand", addr, prefix, spec("D")).expect(t, "READY", 30*time.Second)
	time.Sleep(4 * testRenew) // a few renew intervals to get its share
	names := slices.Sorted(func(yield func(string) bool) {
		for tn := range tenants {
			if !yield(tn) {
				return
			}
		}
	})
	total := func(w map[string]map[string]int64, tn string) (n int64) {
		for _, p := range procs {
			n += w[tn][p]
		}
		return n
	}
	// The sample: 200 starts of every tenant, about three seconds of the
	// limit-1 tenant's on an idle machine; up to five of them.
	sample := func() map[string]map[string]int64 {
		return window(t, c, prefix, names, procs, 2*time.Minute, func(w map[string]map[string]int64) bool {
			for _, tn := range names {
				if total(w, tn) < 200 {
					return false
				}
			}
			return true
		})
	}
	w := fairWindow(t, 5, sample, func(w map[string]map[string]int64) (wrong []string) {
		for _, tn := range names {
			if share := float64(w[tn]["D"]) / float64(total(w, tn)); share < 1.0/8 {
				wrong = append(wrong, fmt.Sprintf("tenant %s: the joining process started %d of %d tasks (%.3f), want at least half an even share (1/8)",
					tn, w[tn]["D"], total(w, tn), share))
			}
		}
		return wrong
	})
	for _, tn := range names {
		t.Logf("tenant %s (limit %d): tasks started in the window per process %v", tn, tenants[tn], w[tn])
	}
}

// TestContendedLimitOneKeyRuns: two processes, 100 tenants of limit 2 and
// a global limit of 50 that keeps everything contended, and a tenant of
// limit 1 with demand in both: the limit-1 tenant runs at least an eighth
// of what the median tenant runs. (When its permit went back before its
// task could get a global permit, it ran 3 tasks to a median of 70.)
//
// Why not more: the limit-1 permit is in one process at a time, so half
// of the median is the most it can get. Under a full global limit its
// next task waits for its turn at the global limit longer than a poll
// interval, so the permit is idle and goes to the process that waits for
// it then, if any. A process waits for it only while a task of it has a
// global permit and asks (its record ends when a probe finds none asking:
// TestLimitOnePermitTurnNeedsATaskThatAsks), so the turns do not
// alternate: windows saw A:0 B:35 and A:26 B:2. Only the total is
// checked; the per-process split is not what the design bounds. Its rate
// is that of hand-overs, which a loaded machine stretches more than it
// slows the median tenant: about 0.4 of the median on an idle machine,
// 0.17 to 0.26 under a loaded -race run. The sample is the window in which
// the median tenant starts 100 tasks, however long a loaded machine takes
// for them: a six-second window shrank to 14 and k to 1 there. The ratio
// is wanted in one of up to three such windows in a row (fairWindow): a
// loaded spell lowers the one it falls in; the starvation this guards
// against is in every window.
func TestContendedLimitOneKeyRuns(t *testing.T) {
	addr := startRedis(t)
	prefix := "t:" + t.Name()
	tenants := map[string]int{"k": 1}
	for i := range 100 {
		tenants[fmt.Sprintf("t%02d", i)] = 2
	}
	procs := []string{"A", "B"}
	for _, p := range procs {
		s := demandSpec{name: p, tenants: tenants, global: 50, task: 20 * time.Millisecond, depth: 2}
		startChild(t, "demand", addr, prefix, s.String()).expect(t, "READY", 30*time.Second)
	}
	c := newClient(t, addr)
	time.Sleep(4 * testRenew)
	names := slices.Sorted(func(yield func(string) bool) {
		for tn := range tenants {
			if !yield(tn) {
				return
			}
		}
	})
	limitTwo := func(w map[string]map[string]int64) []int64 {
		var per []int64
		for _, tn := range names {
			if tn != "k" {
				per = append(per, w[tn]["A"]+w[tn]["B"])
			}
		}
		slices.Sort(per)
		return per
	}
	// The sample: 100 starts of the median tenant, about eight seconds on
	// an idle machine; up to three of them.
	sample := func() map[string]map[string]int64 {
		return window(t, c, prefix, names, procs, 2*time.Minute, func(w map[string]map[string]int64) bool {
			per := limitTwo(w)
			return per[len(per)/2] >= 100
		})
	}
	w := fairWindow(t, 3, sample, func(w map[string]map[string]int64) []string {
		per := limitTwo(w)
		if k, median := w["k"]["A"]+w["k"]["B"], per[len(per)/2]; 8*k < median {
			return []string{fmt.Sprintf("the contended limit-1 tenant started %d tasks, the median tenant %d: want at least an eighth", k, median)}
		}
		return nil
	})
	per := limitTwo(w)
	t.Logf("limit-1 tenant: %d tasks (%v); median tenant of limit 2: %d (min %d, max %d)",
		w["k"]["A"]+w["k"]["B"], w["k"], per[len(per)/2], per[0], per[len(per)-1])
}

// TestBatchesDoNotStall: six holders (in this process), ten tenants of
// limit 4 and a global limit of 64, each holder submitting batches of
// 2,000 short tasks and waiting for each batch, so that every tenant is
// contended and each holder's demand for a tenant comes and goes. Permits
// a holder no longer uses must reach the ones that wait as they free: the
// renew interval is 10s here, and a permit left idle until a renewal round
// (or a waiter not woken until then) would stall a tenant that long.
//
// What is bounded is a stall, not a wait: the longest time during which a
// tenant had tasks waiting to start and no task of it started, in any
// holder. A task's wait to start is mostly its batch's own length, which a
// loaded machine stretches; a tenant's starts stop only while its permits
// are idle or lost, or while no holder that waits for them is told, since
// its tasks take a millisecond. The tenant is counted across the holders:
// one holder may rightly wait while the others run the tenant's tasks (it
// is over its share, or another keeps its block for a quantum, the renew
// interval too), and a stall of one tenant is a stall even while the
// others run. The first renewal round comes 10s after the holders start,
// so a stall lasts until then, a good deal more than the bound, a quarter
// of the renew interval.
//
// The machine's own stalls are taken out of what is bounded: the spells in
// which this process was not run or redis-server did not answer (a
// pauseWatch) stop every holder, whatever it does, and a loaded machine
// has spells of seconds. For the same reason the holders' client and op
// timeouts are long: a spell longer than a short op timeout, three times
// in a row, takes a holder down and its tasks are refused, which is what a
// holder should do, and not what this test is about.
func TestBatchesDoNotStall(t *testing.T) {
	addr := startRedis(t)
	pauses := watchPauses(t, addr)
	const holders, tenants, batch = 6, 10, 2000
	const renew = 10 * time.Second
	const bound = renew / 4
	var exs []*executor.Executor
	for range holders {
		h, err := redislimit.New(newClient(t, addr), redislimit.WithPrefix("t:"+t.Name()), redislimit.WithPollInterval(testPoll),
			redislimit.WithLeaseTTL(30*time.Second), redislimit.WithRenewInterval(renew), redislimit.WithOpTimeout(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		exs = append(exs, newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(256), policy.WithDefaultMaxConcurrency(16),
			policy.WithDefaultMaxInFlight(policy.Unlimited)}, h.Groups(4), h.Global(64)))
	}
	// Per tenant: its tasks submitted and not started yet, and since when
	// it has had waiting tasks and no start (the last start, or the
	// submission that ended a time with none waiting). The stalls longer
	// than the bound are kept, to be judged without the machine's spells.
	type stallSpell struct {
		tenant   int
		from, to time.Time
	}
	var mu sync.Mutex
	var waiting [tenants]int
	var since [tenants]time.Time
	var stall time.Duration
	var stalled int
	var long []stallSpell
	var wg sync.WaitGroup
	for _, ex := range exs {
		wg.Go(func() {
			for range 3 {
				var hs []*executor.Handle[int]
				for i := range batch {
					tn := i % tenants
					mu.Lock()
					if waiting[tn] == 0 {
						since[tn] = time.Now()
					}
					waiting[tn]++
					mu.Unlock()
					hd, err := executor.Submit(ex, bg, executor.Task[int]{Group: fmt.Sprint("t", tn), Fn: func(context.Context) (int, error) {
						mu.Lock()
						now := time.Now()
						d := now.Sub(since[tn])
						if d > stall {
							stall, stalled = d, tn
						}
						if d > bound {
							long = append(long, stallSpell{tn, since[tn], now})
						}
						waiting[tn]--
						since[tn] = now
						mu.Unlock()
						time.Sleep(time.Millisecond)
						return 0, nil
					}})
					if err != nil {
						t.Error(err)
						return
					}
					hs = append(hs, hd)
				}
				for _, hd := range hs {
					if r, err := hd.Wait(ctxTimeout(t, time.Minute)); err != nil || r.Status != executor.Success {
						t.Errorf("task: %v %v %v", r.Status, r.Err, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	t.Logf("the longest time a tenant had tasks waiting and none started: %v (t%d)", stall, stalled)
	for _, sp := range long {
		d := sp.to.Sub(sp.from)
		still := pauses.within(t, sp.from, sp.to)
		t.Logf("tenant t%d: %v with tasks waiting and none started, %v of it with the machine or Redis standing still", sp.tenant, d, still)
		if d-still > bound {
			t.Errorf("tenant t%d had tasks waiting and started none for %v (%v without the machine's spells): permits stayed idle, or a waiter was not told, while others waited",
				sp.tenant, d, d-still)
		}
	}
}

// turnTaker is a task of weight 1 of key "g" that waits for l as an
// executor's does: once it asks, each notify asks again (the executor
// dispatches in notify), until a permit comes on got.
type turnTaker struct {
	mu   sync.Mutex
	l    *redislimit.Limiter
	want bool
	err  error
	got  chan executor.LimiterPermit
}

func (w *turnTaker) notify(string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.askLocked()
}

func (w *turnTaker) ask() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.want = true
	w.askLocked()
}

func (w *turnTaker) askLocked() {
	if !w.want || w.err != nil {
		return
	}
	p, err := w.l.TryAcquire("g", 1)
	if err != nil {
		w.err = err
		return
	}
	if p != nil {
		w.want = false
		w.got <- p
	}
}

// TestLimitOnePermitTakesTurns: two holders of a limit-1 key ask for it in
// turn, each while the other holds it: each time, the one that waits gets
// it once the other's task releases it, and Redis records it as waiting
// before that (it keeps asking at every notify, as an executor's task
// that waits for this key alone does). The permit goes A, B, A, B, ...:
// this is the alternation docs/cluster.md describes. Nothing is timed: the
// bounds are hang guards.
func TestLimitOnePermitTakesTurns(t *testing.T) {
	addr := startRedis(t)
	prefix := "t:" + t.Name()
	hs := []*redislimit.Holder{newHolder(t, addr), newHolder(t, addr)}
	subscribed(t, addr, 2, hs[0])
	ws := make([]*turnTaker, len(hs))
	for i, h := range hs {
		ws[i] = &turnTaker{l: h.Groups(1), got: make(chan executor.LimiterPermit, 1)}
		if err := ws[i].l.Attach(ws[i].notify); err != nil {
			t.Fatal(err)
		}
	}
	c := newClient(t, addr)
	take := func(i int) executor.LimiterPermit {
		t.Helper()
		select {
		case p := <-ws[i].got:
			return p
		case <-time.After(30 * time.Second): // a hang guard
			ws[i].mu.Lock()
			defer ws[i].mu.Unlock()
			t.Fatalf("holder %d did not get the permit (err %v)", i, ws[i].err)
			return nil
		}
	}
	ws[0].ask()
	p, at := take(0), 0
	for range 6 {
		next := 1 - at
		ws[next].ask()
		eventually(t, "the other holder is recorded as waiting", 30*time.Second, func() bool {
			n, err := c.ZCard(bg, prefix+":{group:g}:w").Result()
			return err == nil && n == 1
		})
		p.Release()
		p, at = take(next), next
	}
	p.Release()
}

// TestLimitOnePermitTurnNeedsATaskThatAsks: a holder refused a limit-1 key
// is recorded as waiting, but its task does not ask again when notified,
// as an executor's task that must first get a permit of a full global
// limit does not. The probe finds no task asking (the executor does not
// tell a limiter that a task gave up, so this is how the holder learns
// it), and the record ends: the holder that has the permit is then the
// only contender and takes it again for its next task. This is why under
// a full global limit a limit-1 key's turns are uneven
// (TestContendedLimitOneKeyRuns): it goes to a holder that waits for it
// when it is freed, not to each holder in turn. Nothing is timed: the
// bounds are hang guards.
func TestLimitOnePermitTurnNeedsATaskThatAsks(t *testing.T) {
	addr := startRedis(t)
	prefix := "t:" + t.Name()
	// B renews by hand: its rounds below are the only ones, and its
	// record lives in Redis for as long as its long lease TTL allows, so
	// that only the probe can end it.
	ha, hb := newHolder(t, addr), newHolder(t, addr, manualRenewals()...)
	subscribed(t, addr, 2, ha)
	wa := &turnTaker{l: ha.Groups(1), got: make(chan executor.LimiterPermit, 1)}
	if err := wa.l.Attach(wa.notify); err != nil {
		t.Fatal(err)
	}
	lb := hb.Groups(1)
	attach(t, lb) // notified, it asks nothing
	wa.ask()
	p := <-wa.got // granted at once: nobody else holds the key
	if pb, err := lb.TryAcquire("g", 1); pb != nil || err != nil {
		t.Fatalf("TryAcquire = %v, %v; want B to wait, the key leased by A", pb, err)
	}
	c := newClient(t, addr)
	waiters := func() int64 {
		n, err := c.ZCard(bg, prefix+":{group:g}:w").Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	eventually(t, "B is recorded as waiting", 30*time.Second, func() bool { return waiters() == 1 })
	// B's renewal round asks again for the refused key, with no task
	// asking since: a probe.
	eventually(t, "B's record ends, no task of it asking", 30*time.Second, func() bool {
		redislimit.RenewNow(hb)
		return waiters() == 0
	})
	p.Release()
	wa.ask()
	select {
	case p = <-wa.got:
		p.Release()
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("A did not get the permit back with no one waiting")
	}
}
