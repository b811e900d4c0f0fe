package redislimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// A task of B waits for a group limit of 1 that A's running task holds:
// Redis refuses B and records it as waiting. Then B's task gives up (its
// context is cancelled, or its queue timeout fires): the executor does not
// tell the limiter. At B's next renewal round, which asks Redis again for a
// refused key, B must learn that no task waits any more and end its
// record, not refresh it for the task that is gone (A and the others would
// split the limit with B, and hear B's refusals, until the demand is a TTL
// old). The renewal rounds are the test's own and the TTL is long: nothing
// else ends the record within the hang guard.
func TestGivenUpWaitEndsTheWaitingRecord(t *testing.T) {
	for _, tc := range []struct {
		name   string
		global bool
		popts  []policy.Option
		end    func(cancel context.CancelFunc)
	}{
		{"cancelled", false, nil, func(cancel context.CancelFunc) { cancel() }},
		{"queue timeout", false, []policy.Option{policy.WithQueueTimeout(300 * time.Millisecond)}, func(context.CancelFunc) {}},
		{"global limit", true, nil, func(cancel context.CancelFunc) { cancel() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := startRedis(t)
			hA := newHolder(t, addr, manualRenewals()...)
			hB := newHolder(t, addr, manualRenewals()...)
			limit := func(h *redislimit.Holder) (group, global *redislimit.Limiter) {
				if tc.global {
					return nil, h.Global(1)
				}
				return h.Groups(1), nil
			}
			gA, glA := limit(hA)
			gB, glB := limit(hB)
			exA := newExec(t, nil, gA, glA)
			exB := newExec(t, tc.popts, gB, glB)

			holdTask(t, exA, "g")

			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			waiter, err := executor.Submit(exB, ctx, executor.Task[int]{Group: "g",
				Fn: func(context.Context) (int, error) { return 0, nil }})
			if err != nil {
				t.Fatal(err)
			}
			c := newClient(t, addr)
			w := "t:" + t.Name() + ":{group:g}:w"
			if tc.global {
				w = "t:" + t.Name() + ":{global:}:w"
			}
			recorded := func() bool { n, err := c.ZCard(bg, w).Result(); return err == nil && n > 0 }
			eventually(t, "B refused and recorded as waiting", 10*time.Second, func() bool {
				return hB.Stats().RefillsDenied > 0 && recorded()
			})

			tc.end(cancel)
			if r, _ := waiter.Wait(ctxTimeout(t, 10*time.Second)); r.Status == executor.Success {
				t.Fatalf("B's task ran with the limit held by A: %v", r.Status)
			}
			redislimit.RenewNow(hB)
			eventually(t, "B's waiting record ended once its task gave up", 10*time.Second, func() bool { return !recorded() })
		})
	}
}

// A task of B waits for a group limit of 1 that A's running task holds:
// Redis refuses B, and B asks again only when it hears that permits were
// freed, or at its renewal round (neither comes here: the renewal rounds
// are the test's own, and A frees nothing). Asking the executor whether a
// task still waits (which B does before it asks again) must not turn into
// asking Redis at the poll rate.
func TestRefusedWaiterDoesNotPoll(t *testing.T) {
	addr := startRedis(t)
	hA := newHolder(t, addr, manualRenewals()...)
	hB := newHolder(t, addr, manualRenewals()...)
	exA := newExec(t, nil, hA.Groups(1), nil)
	exB := newExec(t, nil, hB.Groups(1), nil)
	holdTask(t, exA, "g")
	if _, err := executor.Submit(exB, bg, executor.Task[int]{Group: "g",
		Fn: func(context.Context) (int, error) { return 0, nil }}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "B refused", 10*time.Second, func() bool { return hB.Stats().RefillsDenied > 0 })
	// One renewal round: B asks again (after asking its executor), is
	// refused, and waits for a notice.
	redislimit.RenewNow(hB)
	eventually(t, "B refused again", 10*time.Second, func() bool { return hB.Stats().RefillsDenied > 1 })
	before := hB.Stats().RoundTrips
	time.Sleep(50 * testPoll)
	if n := hB.Stats().RoundTrips - before; n > 1 {
		t.Fatalf("B made %d calls to Redis in %v (poll %v) with nothing freed and no renewal round; want none",
			n, 50*testPoll, testPoll)
	}
}

// Limit 2, both permits held by X's running tasks; Y's task waits, and X
// hears that its share is 1 while Y waits. Then Y's task gives up, and Y,
// the only waiter, ends its record: X must hear that nobody waits any
// more, not keep its share of 1 (and give back the permit above it once
// its quantum is over, for no one) until its next renewal round, minutes
// away here.
func TestLastWaiterLeavingRestoresTheShares(t *testing.T) {
	addr := startRedis(t)
	x := newHolder(t, addr, manualRenewals()...)
	y := newHolder(t, addr, manualRenewals()...)
	subscribed(t, addr, 2, x)
	lx := x.Groups(2)
	nx := attach(t, lx)
	for range 2 {
		defer acquire(t, lx, nx, "g", 1, 5*time.Second).Release()
	}
	exY := newExec(t, nil, y.Groups(2), nil)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	waiter, err := executor.Submit(exY, ctx, executor.Task[int]{Group: "g",
		Fn: func(context.Context) (int, error) { return 0, nil }})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "X hears that Y waits", 10*time.Second, func() bool {
		others, c, _ := redislimit.Share(lx, "g")
		return others == 1 && c == 1
	})
	cancel()
	if r, _ := waiter.Wait(ctxTimeout(t, 10*time.Second)); r.Status != executor.Cancelled {
		t.Fatalf("Y's task: %v %v, want Cancelled", r.Status, r.Err)
	}
	redislimit.RenewNow(y) // Y learns that its task is gone, and ends its record
	eventually(t, "X hears that nobody waits", 10*time.Second, func() bool {
		others, c, _ := redislimit.Share(lx, "g")
		return others == 0 && c == 2
	})
}

// Limit 3: X's tasks hold 2, Y's task of weight 2 waits, and X hears that
// its share is 1 while Y waits (and that Y waits below its share, so that
// X gives back what it does not use). X's first task ends, its permit goes
// back, and Y, the only waiter, is granted its 2: X must hear that nobody
// waits any more, not hold to its share of 1 until its next renewal round,
// minutes away here.
func TestLastWaiterGrantedRestoresTheShares(t *testing.T) {
	addr := startRedis(t)
	x := newHolder(t, addr, manualRenewals()...)
	y := newHolder(t, addr, manualRenewals()...)
	subscribed(t, addr, 2, x)
	lx := x.Groups(3)
	nx := attach(t, lx)
	first := acquire(t, lx, nx, "g", 1, 5*time.Second)
	defer acquire(t, lx, nx, "g", 1, 5*time.Second).Release()
	exY := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4)}, y.Groups(3), nil)
	waiter, err := executor.Submit(exY, bg, executor.Task[int]{Group: "g", Weight: 2,
		Fn: func(context.Context) (int, error) { return 0, nil }})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "X hears that Y waits", 10*time.Second, func() bool {
		others, c, _ := redislimit.Share(lx, "g")
		return others == 1 && c == 1
	})
	first.Release()
	if r, err := waiter.Wait(ctxTimeout(t, 10*time.Second)); err != nil || r.Status != executor.Success {
		t.Fatalf("Y's task: %v %v %v, want Success", r.Status, r.Err, err)
	}
	eventually(t, "X hears that nobody waits", 10*time.Second, func() bool {
		others, c, _ := redislimit.Share(lx, "g")
		return others == 0 && c == 3
	})
}

// B's task waits for a group limit of 1 that A holds, asks again after
// Redis refused it, and gives up; then B's renewal round comes while a
// refill is on its way, or due for that last ask. The round must not be
// lost for the key: B learns that no task waits any more and ends its
// record (the refusal of a refill on its way asks again, as after a notice
// of permits freed heard meanwhile; a refill due for an ask made before the
// round asks the executor first). Otherwise the refill refreshes the
// record of a task that is gone until the next round, minutes away here.
func TestRenewalRoundDuringARefillEndsAGivenUpWait(t *testing.T) {
	for _, tc := range []struct {
		name string
		hold func(*redislimit.Holder, func() error)
	}{
		// Refused once; its second refill is held on its way.
		{"refill on its way", redislimit.SetRefillHook},
		// Its first refill's refusal is held before it is used, and the
		// task asks again meanwhile: a refill is due for that ask.
		{"refill due", redislimit.SetReplyHook},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := startRedis(t)
			hA := newHolder(t, addr, manualRenewals()...)
			// A refill held on its way must not be abandoned at the op timeout.
			hB := newHolder(t, addr, append(manualRenewals(), redislimit.WithOpTimeout(time.Minute))...)
			lA, lB := hA.Groups(1), hB.Groups(1)
			p := acquire(t, lA, attach(t, lA), "g", 1, 10*time.Second)
			defer p.Release()
			attach(t, lB) // B's executor: its task asks only when the test has it ask
			c := newClient(t, addr)
			w := "t:" + t.Name() + ":{group:g}:w"
			recorded := func() bool { n, err := c.ZCard(bg, w).Result(); return err == nil && n > 0 }
			ask := func() {
				t.Helper()
				if p, err := lB.TryAcquire("g", 1); p != nil || err != nil {
					t.Fatalf("TryAcquire with the limit held by A: %v, %v", p, err)
				}
			}
			parked, open := holdCalls(hB, tc.hold)
			defer open()
			if tc.name == "refill on its way" {
				open()
				ask()
				eventually(t, "B refused", 10*time.Second, func() bool { return hB.Stats().RefillsDenied > 0 })
				parked, open = holdCalls(hB, tc.hold)
				defer open()
			}
			ask()
			<-parked
			if tc.name == "refill due" {
				ask()
			}
			// The task gives up: it asks no more. Then the round.
			if !recorded() {
				t.Fatal("B not recorded as waiting")
			}
			redislimit.RenewNow(hB)
			open()
			eventually(t, "B's waiting record ended once its task gave up", 10*time.Second, func() bool { return !recorded() })
		})
	}
}
