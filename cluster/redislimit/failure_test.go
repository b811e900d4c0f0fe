package redislimit_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/cluster/redislimit/redistest"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// blockers submits n tasks of group "held" to ex that report their start
// (with their token) and run until their context ends.
func blockers(t *testing.T, ex *executor.Executor, n int) (started chan int64, causes chan error) {
	t.Helper()
	started, causes = make(chan int64, n), make(chan error, n)
	for range n {
		_, err := executor.Submit(ex, bg, executor.Task[int]{Group: "held", Fn: func(ctx context.Context) (int, error) {
			tok, _ := redislimit.FencingToken(ctx)
			started <- tok
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return 0, nil
		}})
		if err != nil {
			t.Fatalf("Submit: %v", err)
		}
	}
	return started, causes
}

// TestKilledHolderSlotsReturn kills a holder process (SIGKILL) while its
// tasks hold every slot of a group: its slots come back within the lease
// TTL plus one renewal period and this process's waiting tasks get them,
// with fencing tokens greater than every token the killed holder had.
//
// The child must keep its leases until it is killed: a stall of the child
// longer than its validity less a renew interval (80% of the TTL less a
// quarter of it) loses them, and this process's tasks rightly start. With
// the suite's TTL tripled that was 1.65s, and this process watched its
// tasks wait for 1.5s before the kill. The child now leases for six times
// the suite's TTL (a stall of 3.3s), and this process kills it as soon as
// Redis has recorded its holder as waiting, rather than after a fixed
// watch; its renew interval, and with it every bound after the kill, stay
// three times the suite's.
func TestKilledHolderSlotsReturn(t *testing.T) {
	addr := startRedis(t)
	const n, scale = 3, 3
	const ttl, renew = 2 * scale * testTTL, scale * testRenew
	t.Setenv(childTTL, ttl.String())
	prefix := "t:" + t.Name()
	k := startChild(t, "hold", addr, prefix, strconv.Itoa(n))
	var childMax int64
	for range n {
		tok, _ := strconv.ParseInt(k.expect(t, "TOKEN", 30*time.Second), 10, 64)
		childMax = max(childMax, tok)
	}
	k.expect(t, "READY", 30*time.Second)

	h := newHolder(t, addr, redislimit.WithLeaseTTL(ttl), redislimit.WithRenewInterval(renew))
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(n)}, h.Groups(n), nil)
	started, _ := blockers(t, ex, n)
	c := newClient(t, addr)
	eventually(t, "this holder is refused and recorded as waiting", 30*time.Second, func() bool {
		w, err := c.ZCard(bg, prefix+":{group:held}:w").Result()
		return err == nil && w == 1
	})
	if s := h.Stats(); s.Leases != 0 {
		t.Fatalf("this holder has %d leases while the child held every slot", s.Leases)
	}
	select {
	case tok := <-started:
		t.Fatalf("a task started (token %d) while the child held every slot", tok)
	default:
	}
	killed := time.Now()
	if err := k.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		select {
		case tok := <-started:
			if tok <= childMax {
				t.Fatalf("token %d issued after the kill is not greater than the killed holder's %d", tok, childMax)
			}
		case <-time.After(time.Minute): // a hang guard
			t.Fatalf("%d of %d slots came back", i, n)
		}
	}
	// The lease was renewed at most one renewal period before the kill, so
	// it expires within the TTL of it; the waiting holder asks again at its
	// next renewal round. The slack covers scheduling on a loaded machine.
	took := time.Since(killed)
	const bound = ttl + renew + scale*time.Second
	t.Logf("slots back %v after the kill (TTL %v, renewal %v); killed holder's tokens <= %d", took, ttl, renew, childMax)
	if took > bound {
		t.Fatalf("slots came back %v after the kill, want within %v", took, bound)
	}
}

// TestReapedSlotsAreAnnounced: a holder process is killed (SIGKILL) while
// its task holds one of a group's two slots; a live holder's task holds the
// other, and a third holder waits. The live holder's renewal round, the
// first script to touch the key once the killed holder's lease has expired,
// reaps that lease and tells the waiting holder at once that a permit is
// free: its task gets it then, not at its own next renewal round (minutes
// away: it renews by hand, as manualRenewals does).
func TestReapedSlotsAreAnnounced(t *testing.T) {
	addr := startRedis(t)
	const scale = 3
	const ttl, renew = scale * testTTL, scale * testRenew // see TestKilledHolderSlotsReturn
	// The child leases for twice that, as TestKilledHolderSlotsReturn's: a
	// stall of it that lost its leases before the kill would let a waiting
	// task start early, and fail the test.
	t.Setenv(childTTL, (2 * ttl).String())
	prefix := "t:" + t.Name()
	k := startChild(t, "hold", addr, prefix, "1/2")
	k.expect(t, "READY", 30*time.Second)

	live := newHolder(t, addr, redislimit.WithLeaseTTL(ttl), redislimit.WithRenewInterval(renew))
	ll := live.Groups(2)
	pl := acquire(t, ll, attach(t, ll), "held", 1, 30*time.Second)
	defer pl.Release()

	w := newHolder(t, addr, manualRenewals()...)
	lw := w.Groups(2)
	nw := attach(t, lw)
	subscribed(t, addr, 3, w)
	if p, err := lw.TryAcquire("held", 1); p != nil || err != nil {
		t.Fatalf("TryAcquire = %v, %v; want it to wait, the group's slots all leased", p, err)
	}
	c := newClient(t, addr)
	eventually(t, "the holder is refused and recorded as waiting", 30*time.Second, func() bool {
		n, err := c.ZCard(bg, prefix+":{group:held}:w").Result()
		return err == nil && n == 1
	})

	if err := k.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// The killed holder's lease expires within the TTL, and the live
	// holder renews within a renew interval of that: far within the guard,
	// far before the waiting holder's next renewal round.
	p := acquire(t, lw, nw, "held", 1, 10*ttl)
	p.Release()
}

// TestReapedSlotsLeftFreeAreAnnounced: a holder process is killed
// (SIGKILL) while its tasks hold both of a group's slots, and two holders'
// tasks wait, each within its holder's cap. No renewal touches the key: the
// first script to do so once the killed holder's leases have expired is
// the request of the waiting holder that asks at every renewal round. It
// reaps them, is granted one slot, and tells the other waiting holder at
// once that the other slot is free: its task gets it then, not at its
// holder's next renewal round (minutes away: it renews by hand, as
// manualRenewals does).
func TestReapedSlotsLeftFreeAreAnnounced(t *testing.T) {
	addr := startRedis(t)
	const scale = 3
	const ttl, renew = scale * testTTL, scale * testRenew // see TestKilledHolderSlotsReturn
	// The child leases for twice that, as TestKilledHolderSlotsReturn's: a
	// stall of it that lost its leases before the kill would let a waiting
	// task start early, and fail the test.
	t.Setenv(childTTL, (2 * ttl).String())
	prefix := "t:" + t.Name()
	k := startChild(t, "hold", addr, prefix, "2/2")
	k.expect(t, "READY", 30*time.Second)

	x := newHolder(t, addr, redislimit.WithLeaseTTL(ttl), redislimit.WithRenewInterval(renew))
	w := newHolder(t, addr, manualRenewals()...)
	lw := w.Groups(2)
	subscribed(t, addr, 3, w)
	one := []policy.Option{policy.WithDefaultMaxConcurrency(1)}
	startedX, _ := blockers(t, newExec(t, one, x.Groups(2), nil), 1)
	startedW, _ := blockers(t, newExec(t, one, lw, nil), 1)
	c := newClient(t, addr)
	eventually(t, "both holders are refused and recorded as waiting", 30*time.Second, func() bool {
		n, err := c.ZCard(bg, prefix+":{group:held}:w").Result()
		return err == nil && n == 2
	})
	// Each waits within its cap (one permit each of the two, once the
	// killed holder's are gone): no rise of its cap wakes it.
	eventually(t, "the waiting holder hears its cap of 1", 30*time.Second, func() bool {
		others, cap, _ := redislimit.Share(lw, "held")
		return others > 0 && cap == 1
	})

	if err := k.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for _, started := range []chan int64{startedX, startedW} {
		select {
		case <-started:
		case <-time.After(10 * ttl): // a hang guard, far below a manual renew interval
			t.Fatal("a waiting task did not start once the killed holder's leases expired")
		}
	}
}

// TestPartitionedHolderLearnsFirst cuts one holder off from Redis while
// its task holds the group's only slot, in two ways: its renewals fail (as
// behind a partition that refuses connections), or its connection stalls
// (a proxy that stops forwarding: calls hang, and only the op timeout ends
// them). Either way its task's context is cancelled with ErrLeaseLost
// before the other holder's task gets the slot, which has a greater
// fencing token. This is the guarantee for a live process; a paused one
// is TestPausedHolderIsFenced's.
//
// The order is kept by a fifth of the TTL (the holder trusts a lease for
// 80% of it), less what the partitioned holder's cancellation is held up:
// with the suite's 1s TTL a stall of the machine of 200 to 450ms between
// the end of the validity and the task seeing it failed the test. Both
// holders lease for partitionedTTL, whose fifth (2s) only a holder that
// does not enforce its validity fails; they renew at the suite's interval,
// so the other holder still asks within 250ms of the lease expiring. The
// two cuts run in parallel, each with its own Redis.
func TestPartitionedHolderLearnsFirst(t *testing.T) {
	t.Run("renewals fail", func(t *testing.T) {
		t.Parallel()
		addr := startRedis(t)
		a := newHolder(t, addr, redislimit.WithLeaseTTL(partitionedTTL))
		partitionedLearnsFirst(t, addr, a, func() {
			partitioned := func() error { return errors.New("partitioned") }
			redislimit.SetRenewHook(a, partitioned)
			redislimit.SetReleaseHook(a, partitioned) // the give-back of the lost lease fails too
		})
	})
	t.Run("connection stalls", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t)
		proxy := redistest.StartProxy(t, srv.Addr())
		a := newHolder(t, proxy.Addr(), redislimit.WithLeaseTTL(partitionedTTL))
		partitionedLearnsFirst(t, srv.Addr(), a, proxy.Stall)
		proxy.Resume()
	})
}

// partitionedTTL is the lease TTL of TestPartitionedHolderLearnsFirst's
// holders.
const partitionedTTL = 10 * time.Second

func partitionedLearnsFirst(t *testing.T, addr string, a *redislimit.Holder, cut func()) {
	b := newHolder(t, addr, redislimit.WithLeaseTTL(partitionedTTL))
	exA := newExec(t, nil, a.Groups(1), nil)
	exB := newExec(t, nil, b.Groups(1), nil)
	type mark struct {
		at    time.Time
		tok   int64
		cause error
	}
	lostA, startB := make(chan mark, 1), make(chan mark, 1)
	startedA := make(chan int64, 1)
	_, err := executor.Submit(exA, bg, executor.Task[int]{Group: "g", Fn: func(ctx context.Context) (int, error) {
		tok, _ := redislimit.FencingToken(ctx)
		startedA <- tok
		<-ctx.Done()
		lostA <- mark{time.Now(), tok, context.Cause(ctx)}
		return 0, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	<-startedA
	cut()
	_, err = executor.Submit(exB, bg, executor.Task[int]{Group: "g", Fn: func(ctx context.Context) (int, error) {
		tok, _ := redislimit.FencingToken(ctx)
		startB <- mark{at: time.Now(), tok: tok}
		return 0, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	var la, sb mark
	select {
	case la = <-lostA:
	case <-time.After(time.Minute):
		t.Fatal("the partitioned holder's task was never told")
	}
	select {
	case sb = <-startB:
	case <-time.After(time.Minute):
		t.Fatal("the other holder never got the slot")
	}
	var lle *redislimit.LeaseLostError
	if !errors.Is(la.cause, redislimit.ErrLeaseLost) || !errors.As(la.cause, &lle) || lle.Token != la.tok {
		t.Fatalf("cause %v, want a *LeaseLostError for token %d", la.cause, la.tok)
	}
	if la.at.After(sb.at) {
		t.Fatalf("the other holder's task started %v before the partitioned one was told", la.at.Sub(sb.at))
	}
	if sb.tok <= la.tok {
		t.Fatalf("token %d after the loss is not greater than the lost %d", sb.tok, la.tok)
	}
	t.Logf("told %v before the slot moved; tokens %d -> %d", sb.at.Sub(la.at), la.tok, sb.tok)
	if s := a.Stats(); s.LeasesLost == 0 || s.TasksCancelled != 1 {
		t.Fatalf("partitioned holder's stats %+v", s)
	}
}

// TestPausedProcessSeesLoss stops a holder process (SIGSTOP) past its lease
// TTL while its task holds the only slot: this process gets the slot with a
// greater token, and the paused one, resumed, sees its task's context
// cancelled with ErrLeaseLost.
func TestPausedProcessSeesLoss(t *testing.T) {
	addr := startRedis(t)
	k := startChild(t, "hold", addr, "t:"+t.Name(), "1")
	childTok, _ := strconv.ParseInt(k.expect(t, "TOKEN", 30*time.Second), 10, 64)
	k.expect(t, "READY", 30*time.Second)
	if err := k.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	h := newHolder(t, addr)
	ex := newExec(t, nil, h.Groups(1), nil)
	started, _ := blockers(t, ex, 1)
	var tok int64
	select {
	case tok = <-started:
	case <-time.After(time.Minute):
		t.Fatal("the slot of the paused holder never came back")
	}
	if tok <= childTok {
		t.Fatalf("token %d is not greater than the paused holder's %d", tok, childTok)
	}
	if err := k.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	lost := k.expect(t, "LOST", 30*time.Second)
	f := strings.Fields(lost)
	if len(f) < 2 || f[0] != strconv.FormatInt(childTok, 10) || f[1] != "true" {
		t.Fatalf("the resumed holder printed %q, want its token %d and a cause matching ErrLeaseLost", lost, childTok)
	}
	t.Logf("paused holder told on resume: %s", lost)
}
