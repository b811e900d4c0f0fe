package redislimit_test

import (
	"errors"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/executor"
	"github.com/redis/go-redis/v9"
)

// An executor asks again for its waiting task as soon as a task of the
// key ends here, under its own lock, before the holder's refiller can look
// at the key: the permits the ended task gave back serve the waiting task
// through that TryAcquire. The holder then waits for nothing, and its
// waiting record in Redis ends at once, as when the refiller finds the
// permits first; not after a probe of the executor, once the refusal's
// poll interval is over (a minute here), while Redis splits the key's
// limit with a holder that waits for nothing. The executor is told, so
// that a task of the key that still waits asks again.
func TestWaiterServedByTheExecutorEndsTheRecord(t *testing.T) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	a, la, na, pa := holderWaitingOnG(t, addr)
	recorded(t, rdb, a.ID()+"/1")

	// The refiller is busy with another key's refill while the executor
	// ends the task and asks for the waiting one.
	parked, open := holdCalls(a, redislimit.SetRefillHook)
	defer open()
	if q, err := la.TryAcquire("x", 1); q != nil || err != nil {
		t.Fatalf("TryAcquire(x): %v, %v; want to wait", q, err)
	}
	<-parked
	drain(na)
	pa.Release()
	p, err := la.TryAcquire("g", 2)
	if p == nil || err != nil {
		t.Fatalf("TryAcquire of 2 with the 2 permits just released at hand: %v, %v", p, err)
	}
	defer p.Release()
	open()
	eventually(t, "A's waiting record ends", 5*time.Second, func() bool {
		return errors.Is(rdb.ZScore(bg, "t:"+t.Name()+":{group:g}:w", a.ID()+"/1").Err(), redis.Nil)
	})
	for k := ""; k != "g"; {
		k = waitFor(t, "the executor of g told to ask again", na)
	}
}

// Close tells the executor of a key whose waiting task TryAcquire served
// (the refiller has not told it yet), as it tells those of keys whose
// tasks wait: a task of the key that still waits asks again, and is
// refused with ErrClosed rather than waiting for a notify that no
// refiller sends any more.
func TestCloseTellsTheExecutorOfAServedWaiter(t *testing.T) {
	addr := startRedis(t)
	a, la, na, pa := holderWaitingOnG(t, addr)
	parked, open := holdCalls(a, redislimit.SetRefillHook)
	defer open()
	if q, err := la.TryAcquire("x", 1); q != nil || err != nil {
		t.Fatalf("TryAcquire(x): %v, %v; want to wait", q, err)
	}
	<-parked
	pa.Release()
	p, err := la.TryAcquire("g", 2)
	if p == nil || err != nil {
		t.Fatalf("TryAcquire of 2 with the 2 permits just released at hand: %v, %v", p, err)
	}
	drain(na)
	closed := make(chan error, 1)
	go func() { closed <- a.Close() }()
	eventually(t, "Close begun", 5*time.Second, func() bool { return a.Stats().Mode == redislimit.ModeClosed })
	open()
	waitFor(t, "Close returned", closed)
	told := false
	for len(na) > 0 {
		if <-na == "g" {
			told = true
		}
	}
	if !told {
		t.Fatal("Close did not tell the executor of g to ask again")
	}
}

// holderWaitingOnG returns a holder of a group limit of 3 on key g, whose
// task holds 2 permits (pa) while another of weight 2 waits, refused by
// Redis (its record written), with renewals by hand and a poll interval
// and op timeout of a minute, so that nothing moves unless the test does.
func holderWaitingOnG(t *testing.T, addr string) (*redislimit.Holder, *redislimit.Limiter, notifier, executor.LimiterPermit) {
	t.Helper()
	a := newHolder(t, addr, append(manualRenewals(), redislimit.WithPollInterval(time.Minute),
		redislimit.WithOpTimeout(time.Minute))...)
	la := a.Groups(3)
	na := make(notifier, 16)
	if err := la.Attach(na.notify); err != nil {
		t.Fatal(err)
	}
	pa := acquire(t, la, na, "g", 2, 5*time.Second)
	if q, err := la.TryAcquire("g", 2); q != nil || err != nil {
		t.Fatalf("TryAcquire of 2 with 1 permit left: %v, %v; want to wait", q, err)
	}
	eventually(t, "the refusal used", 5*time.Second, func() bool { return a.Stats().RefillsDenied == 1 })
	return a, la, na, pa
}
