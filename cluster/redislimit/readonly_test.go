package redislimit_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
	"github.com/redis/go-redis/v9"
)

// A Redis that answers every call with an error reply that says it cannot
// serve writes (here READONLY: a primary demoted to a replica by a
// failover, its clients still connected) cannot lease: the holder must
// count those calls failed, go down and apply its failure policy (FailOpen
// here: the task runs on a fallback permit), not count Redis as up and
// keep the task waiting for a lease that never comes.
func TestReadOnlyRedisIsAnOutage(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr, redislimit.WithFailurePolicy(redislimit.FailOpen))
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4)}, h.Groups(2), nil)
	if r, err := runOne(t, ex, "a"); err != nil || r.Status != executor.Success {
		t.Fatalf("task before: %v %v %v", r.Status, r.Err, err)
	}
	// A replica of a primary it cannot reach: it keeps its data and
	// refuses every write.
	if err := newClient(t, addr).ReplicaOf(bg, "127.0.0.1", "1").Err(); err != nil {
		t.Fatal(err)
	}
	r, err := runOne(t, ex, "b")
	if err != nil || r.Status != executor.Success {
		t.Fatalf("task while Redis refuses writes, FailOpen: %v %v %v (stats %+v)", r.Status, r.Err, err, h.Stats())
	}
	if s := h.Stats(); s.Mode != redislimit.ModeDown || s.Fallbacks == 0 {
		t.Fatalf("stats %+v, want down with a fallback", s)
	}
}

// A failure reply to one call of a round trip must count even when another
// call of it had to be sent again with its script (NOSCRIPT, as after a
// restart or a SCRIPT FLUSH) and that second pass succeeded. Here Redis is
// out of memory (maxmemory reached): the renewal of a held lease, whose
// script Redis knows, is refused with OOM, while the give-back sent with it
// in the same round, by a script Redis has not seen yet, writes nothing
// that needs memory and succeeds on its second pass. The round failed: it
// must not count as a renewal, and it must count toward the failed calls in
// a row that bring the holder down.
func TestFailureReplyBesideNoscriptCounts(t *testing.T) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	h := newHolder(t, addr, manualRenewals()...)
	l := h.Groups(2)
	n := attach(t, l)
	p := acquire(t, l, n, "g", 1, 5*time.Second) // held: renewed every round
	defer p.Release()
	q := acquire(t, l, n, "h", 1, 5*time.Second)
	redislimit.RenewNow(h) // Redis now knows the renewal script
	q.Release()
	redislimit.RenewNow(h) // h's permit is free for the whole next round: it goes back then
	// Its lease gone from Redis, the give-back writes nothing that needs
	// memory (it only removes what is left of the lease).
	if err := rdb.Del(bg, "t:"+t.Name()+":{group:h}:s").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(bg, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	defer rdb.ConfigSet(bg, "maxmemory", "0")
	before := h.Stats()
	redislimit.RenewNow(h)
	if s := h.Stats(); s.Returned != before.Returned+1 || s.Renewals != before.Renewals {
		t.Fatalf("round with the renewal refused OOM: renewals %d -> %d, returned %d -> %d; want the give-back "+
			"in the round and the round not counted as a renewal", before.Renewals, s.Renewals, before.Returned, s.Returned)
	}
	if n, err := rdb.HLen(bg, "t:"+t.Name()+":{group:h}:n").Result(); err != nil || n != 0 {
		t.Fatalf("HLEN of h's leases = %d, %v; want the give-back done on its second pass", n, err)
	}
	// Two more failed rounds make three in a row: the holder is down.
	redislimit.SetRenewHook(h, func() error { return errors.New("renewals cut (test)") })
	redislimit.RenewNow(h)
	redislimit.RenewNow(h)
	if s := h.Stats(); s.Mode != redislimit.ModeDown {
		t.Fatalf("after the OOM round and two failed rounds: mode %v, want down", s.Mode)
	}
}

// A Redis that refuses the holder's calls for its credentials (here
// NOPERM: its user's ACL no longer allows scripts; NOAUTH and WRONGPASS
// alike, after a password change) cannot lease either, whatever is asked
// of it, until someone changes its configuration: the holder must go down
// and apply its failure policy, not keep the task waiting for a lease that
// never comes.
func TestRefusedCredentialsAreAnOutage(t *testing.T) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	h := newHolder(t, addr, redislimit.WithFailurePolicy(redislimit.FailOpen))
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4)}, h.Groups(2), nil)
	if r, err := runOne(t, ex, "a"); err != nil || r.Status != executor.Success {
		t.Fatalf("task before: %v %v %v", r.Status, r.Err, err)
	}
	if err := rdb.Do(bg, "ACL", "SETUSER", "default", "-evalsha", "-eval").Err(); err != nil {
		t.Fatal(err)
	}
	defer rdb.Do(bg, "ACL", "SETUSER", "default", "+@all")
	r, err := runOne(t, ex, "b")
	if err != nil || r.Status != executor.Success {
		t.Fatalf("task while Redis refuses the holder's scripts, FailOpen: %v %v %v (stats %+v)", r.Status, r.Err, err, h.Stats())
	}
	if s := h.Stats(); s.Mode != redislimit.ModeDown || s.Fallbacks == 0 {
		t.Fatalf("stats %+v, want down with a fallback", s)
	}
}

// runOne submits a task of group to ex and waits for its result (5s at
// most).
func runOne(t *testing.T, ex *executor.Executor, group string) (executor.Result[int], error) {
	t.Helper()
	hd, err := executor.Submit(ex, bg, executor.Task[int]{Group: group,
		Fn: func(context.Context) (int, error) { return 1, nil }})
	if err != nil {
		t.Fatal(err)
	}
	return hd.Wait(ctxTimeout(t, 5*time.Second))
}

// A reply that says Redis cannot serve the holder must count even when an
// earlier call of the same round trip got a reply that does not (a
// script's error: here WRONGTYPE, a key of the first limit's overwritten
// with a hash). The holder's user may no longer touch the second limit's
// keys (NOPERM): its renewals fail whatever is asked, and three rounds in a
// row must bring the holder down, not count as calls Redis answered. The
// rounds renew the limits in the order they were attached, so the
// WRONGTYPE reply comes first in every round.
func TestFailureReplyAfterScriptErrorCounts(t *testing.T) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	if err := rdb.Do(bg, "ACL", "SETUSER", "lim", "on", ">pw", "~*", "&*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: addr, Username: "lim", Password: "pw", DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond, MaxRetries: -1, Protocol: 2})
	t.Cleanup(func() { c.Close() })
	prefix := "t:" + t.Name()
	h, err := redislimit.New(c, append(manualRenewals(), redislimit.WithPrefix(prefix), redislimit.WithPollInterval(testPoll))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	la, lb := h.Groups(2), h.Groups(2)
	na, nb := attach(t, la), attach(t, lb)
	pa := acquire(t, la, na, "a", 1, 5*time.Second)
	defer pa.Release()
	pb := acquire(t, lb, nb, "b", 1, 5*time.Second)
	defer pb.Release()
	redislimit.RenewNow(h) // Redis now knows the renewal script: no NOSCRIPT below
	if !redislimit.LastFailure(h).IsZero() {
		t.Fatalf("a call failed before the test broke anything: %+v", h.Stats())
	}
	if err := rdb.Del(bg, prefix+":{group:a}:v").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(bg, prefix+":{group:a}:v", "x", 1).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Do(bg, "ACL", "SETUSER", "lim", "resetkeys", "~"+prefix+":{group:a}:*").Err(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		redislimit.RenewNow(h)
	}
	if s := h.Stats(); s.Mode != redislimit.ModeDown || s.Outages != 1 {
		t.Fatalf("after three rounds refused NOPERM behind a WRONGTYPE: mode %v, outages %d; want down, 1 outage",
			s.Mode, s.Outages)
	}
}

// A key of one limit that holds a value of another type (here WRONGTYPE:
// its version key overwritten with a hash) makes Redis answer every refill
// of that key with the same error reply, which is no outage. The key's task
// must be refused with an error naming the key and the reply, not wait for
// ever while the refiller asks Redis at the poll rate; the next task of
// the key within a renew interval is refused with no call to Redis; and
// the other keys are served.
func TestKeyErrorReplyRefusesTheKeysTasks(t *testing.T) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	prefix := "t:" + t.Name()
	if err := rdb.HSet(bg, prefix+":{group:a}:v", "x", 1).Err(); err != nil {
		t.Fatal(err)
	}
	h := newHolder(t, addr, manualRenewals()...)
	l := h.Groups(2)
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4)}, l, nil)
	r, err := runOne(t, ex, "a")
	if err != nil || r.Status != executor.Rejected || !errors.Is(r.Err, redislimit.ErrKeyFailed) ||
		!strings.Contains(r.Err.Error(), `"a"`) || !strings.Contains(r.Err.Error(), "WRONGTYPE") {
		t.Fatalf("task of a key whose data Redis cannot use: %v %v %v (stats %+v); "+
			"want Rejected with ErrKeyFailed naming the key and the reply", r.Status, r.Err, err, h.Stats())
	}
	// The refused request may have leased (its reply is an error): the
	// holder gives it back by its id in a pass of its own. Counted once
	// that is done.
	eventually(t, "the refused request given back", 5*time.Second, func() bool { return redislimit.Orphans(l, "a") == 0 })
	trips := h.Stats().RoundTrips
	// Refused as it is submitted: the executor asks the limiter then.
	_, err = executor.Submit(ex, bg, executor.Task[int]{Group: "a", Fn: func(context.Context) (int, error) { return 1, nil }})
	if !errors.Is(err, redislimit.ErrKeyFailed) {
		t.Fatalf("second task of the key: %v; want refused with ErrKeyFailed", err)
	}
	if got := h.Stats().RoundTrips; got != trips {
		t.Fatalf("round trips %d, then %d after a task refused within the renew interval; want no call", trips, got)
	}
	if r, err := runOne(t, ex, "b"); err != nil || r.Status != executor.Success {
		t.Fatalf("task of another key: %v %v %v; want it run", r.Status, r.Err, err)
	}
	if s := h.Stats(); s.Mode != redislimit.ModeUp {
		t.Fatalf("stats %+v, want up", s)
	}
}

// Redis does not roll back a script that fails midway. A key of the wrong
// type that an acquire meets only once it has written (here the fencing
// counter, a hash, read after the slot's bit is set) must make it refuse
// before its first write: else the slot stays taken in Redis for a lease
// never recorded, and once the key is fixed no holder can lease it (the
// limit here is 1). The holder's own give-back of the refused request by
// its id (which records the request as run) is all it leaves.
func TestAcquireFailingLateWritesNothing(t *testing.T) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	prefix := "t:" + t.Name()
	base := prefix + ":{group:a}:"
	if err := rdb.HSet(bg, base+"f", "x", 1).Err(); err != nil {
		t.Fatal(err)
	}
	a := newHolder(t, addr, manualRenewals()...)
	la := a.Groups(1)
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4)}, la, nil)
	if r, err := runOne(t, ex, "a"); err != nil || !errors.Is(r.Err, redislimit.ErrKeyFailed) ||
		!strings.Contains(r.Err.Error(), "WRONGTYPE") {
		t.Fatalf("task of a key whose fencing counter is a hash: %v %v %v; want refused with ErrKeyFailed, WRONGTYPE",
			r.Status, r.Err, err)
	}
	eventually(t, "the refused request given back", 5*time.Second, func() bool { return redislimit.Orphans(la, "a") == 0 })
	keys, err := rdb.Keys(bg, base+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	if want := []string{base + "f", base + "r"}; !slices.Equal(keys, want) {
		t.Fatalf("keys after the refused acquire: %v; want %v (the key of the wrong type, and the give-back's record)", keys, want)
	}
	if err := rdb.Del(bg, base+"f").Err(); err != nil {
		t.Fatal(err)
	}
	b := newHolder(t, addr, manualRenewals()...)
	lb := b.Groups(1)
	p := acquire(t, lb, attach(t, lb), "a", 1, 5*time.Second) // the one slot is free
	p.Release()
}

// Likewise a renewal that meets a key of the wrong type (the served
// times, read only while someone waits) refuses before it writes: the
// key's version is not bumped, and no lease extended that its holder
// does not know renewed.
func TestRenewalFailingLateWritesNothing(t *testing.T) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	prefix := "t:" + t.Name()
	base := prefix + ":{group:a}:"
	h := newHolder(t, addr, manualRenewals()...)
	l := h.Groups(2)
	p := acquire(t, l, attach(t, l), "a", 1, 5*time.Second)
	defer p.Release()
	if err := rdb.ZAdd(bg, base+"w", redis.Z{Score: 1e15, Member: "someone"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(bg, base+"g", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	before := map[string]string{}
	for _, k := range []string{"l", "n", "s", "b", "v"} {
		before[k], _ = rdb.Dump(bg, base+k).Result()
	}
	redislimit.RenewNow(h)
	if s := h.Stats(); s.Mode != redislimit.ModeUp || s.LeasesLost != 0 {
		t.Fatalf("stats %+v after a round refused WRONGTYPE; want up, no lease lost", s)
	}
	for k, d := range before {
		if got, _ := rdb.Dump(bg, base+k).Result(); got != d {
			t.Fatalf("key %s changed by a renewal Redis refused", base+k)
		}
	}
}

// A renewal round whose every renewal Redis refuses with an error reply
// (WRONGTYPE: the key's version counter overwritten with a hash) renewed
// nothing: Stats.Renewals does not count it, as it counts no round with no
// lease to renew.
func TestRefusedRenewalIsNoRenewal(t *testing.T) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	h := newHolder(t, addr, manualRenewals()...)
	l := h.Groups(2)
	p := acquire(t, l, attach(t, l), "a", 1, 5*time.Second)
	defer p.Release()
	redislimit.RenewNow(h)
	if s := h.Stats(); s.Renewals != 1 {
		t.Fatalf("stats %+v after a round that renewed the lease; want 1 renewal", s)
	}
	v := "t:" + t.Name() + ":{group:a}:v"
	if err := rdb.Del(bg, v).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(bg, v, "x", 1).Err(); err != nil {
		t.Fatal(err)
	}
	redislimit.RenewNow(h)
	if s := h.Stats(); s.Renewals != 1 || s.Mode != redislimit.ModeUp {
		t.Fatalf("stats %+v after a round Redis refused WRONGTYPE; want still 1 renewal, up", s)
	}
}

// The tasks refused with ErrKeyFailed are counted (Stats.KeyFailed) and
// reported (EventKeyFailed, with the key and the reply), as the refusals
// of an outage are: the events' counts add up to the counter once Close
// has reported those not reported yet.
func TestKeyErrorRefusalsAreCountedAndReported(t *testing.T) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	prefix := "t:" + t.Name()
	if err := rdb.HSet(bg, prefix+":{group:a}:v", "x", 1).Err(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var evs []redislimit.Event
	h := newHolder(t, addr, append(manualRenewals(), redislimit.WithListener(func(e redislimit.Event) {
		mu.Lock()
		evs = append(evs, e)
		mu.Unlock()
	}))...)
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4)}, h.Groups(2), nil)
	if r, err := runOne(t, ex, "a"); err != nil || !errors.Is(r.Err, redislimit.ErrKeyFailed) {
		t.Fatalf("task of a key whose data Redis cannot use: %v %v %v; want refused with ErrKeyFailed", r.Status, r.Err, err)
	}
	_, err := executor.Submit(ex, bg, executor.Task[int]{Group: "a", Fn: func(context.Context) (int, error) { return 1, nil }})
	if !errors.Is(err, redislimit.ErrKeyFailed) {
		t.Fatalf("second task of the key: %v; want refused with ErrKeyFailed", err)
	}
	ex.Close()
	// Close's own round trip may touch the broken key (whether it does
	// depends on when the refusals came: about one run in thirty under
	// load), and Redis refuses it with WRONGTYPE, which Close reports.
	// Any other error fails the test.
	if err := h.Close(); err != nil && !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatal(err)
	}
	if s := h.Stats(); s.KeyFailed != 2 || s.Rejected != 0 || s.Outages != 0 {
		t.Fatalf("stats %+v; want the 2 tasks counted in KeyFailed, no refusal for an outage", s)
	}
	mu.Lock()
	defer mu.Unlock()
	n := 0
	for _, e := range evs {
		if e.Kind != redislimit.EventKeyFailed {
			continue
		}
		if e.Key != "a" || !errors.Is(e.Err, redislimit.ErrKeyFailed) || !strings.Contains(e.Err.Error(), "WRONGTYPE") {
			t.Fatalf("%v event: key %q, err %v; want key a, ErrKeyFailed with the reply", e.Kind, e.Key, e.Err)
		}
		n += e.Count
	}
	if n != 2 {
		t.Fatalf("EventKeyFailed counts %d refusals (events %+v); want 2, as Stats.KeyFailed", n, evs)
	}
}

// A Redis before 5.0 (or a 5.x or 6.x run with lua-replicate-commands no)
// refuses a script's writes after it read TIME, as every script here does:
// every call is refused alike, for good. The holder must count that as an
// outage and apply its failure policy (FailClosed: the task is refused with
// ErrUnavailable, which carries the reply), not keep the task waiting for a
// lease that never comes. The client here answers every script call with
// that reply, as such a server does.
func TestScriptsRefusedByAnOldRedisAreAnOutage(t *testing.T) {
	addr := startRedis(t)
	c := holderClient(t, addr)
	c.AddHook(refuseScripts{oldRedisReply})
	h, err := redislimit.New(c, redislimit.WithPrefix("t:"+t.Name()), redislimit.WithLeaseTTL(testTTL),
		redislimit.WithRenewInterval(testRenew), redislimit.WithPollInterval(testPoll))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4)}, h.Groups(2), nil)
	r, err := runOne(t, ex, "a")
	if err != nil || r.Status != executor.Rejected || !errors.Is(r.Err, redislimit.ErrUnavailable) ||
		!strings.Contains(r.Err.Error(), "non deterministic") {
		t.Fatalf("task while Redis refuses the scripts' writes after TIME: %v %v %v (stats %+v); "+
			"want Rejected with ErrUnavailable and the reply", r.Status, r.Err, err, h.Stats())
	}
	if s := h.Stats(); s.Mode != redislimit.ModeDown {
		t.Fatalf("stats %+v, want down", s)
	}
}

// oldRedisReply is what Redis 4.0 answers a script that writes after TIME.
const oldRedisReply = replyError("ERR Error running script (call to f_0123): @user_script:4: @user_script: 4: " +
	"Write commands not allowed after non deterministic commands. Call redis.replicate_commands() at the start " +
	"of your script in order to switch to single commands replication mode.")

// replyError is an error reply of Redis, as the client returns one.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// refuseScripts is a client hook that answers every script call (EVAL,
// EVALSHA) with err, without sending it; other commands go to Redis.
type refuseScripts struct{ err replyError }

func (r refuseScripts) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r refuseScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if r.refuse(cmd) {
			return r.err
		}
		return next(ctx, cmd)
	}
}

func (r refuseScripts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var rest []redis.Cmder
		for _, c := range cmds {
			if !r.refuse(c) {
				rest = append(rest, c)
			}
		}
		if len(rest) > 0 {
			_ = next(ctx, rest)
		}
		for _, c := range cmds {
			if err := c.Err(); err != nil {
				return err
			}
		}
		return nil
	}
}

func (r refuseScripts) refuse(c redis.Cmder) bool {
	if n := c.Name(); n == "eval" || n == "evalsha" {
		c.SetErr(r.err)
		return true
	}
	return false
}

// Before Redis 7, an error reply to a command a script runs reaches the
// client wrapped in the script's ERR, its own code after ": -": a primary
// demoted to a replica by a failover answers every script that writes
// with "ERR Error running script (...): ...: -READONLY ...". That is the
// outage TestReadOnlyRedisIsAnOutage shows on Redis 7, and must count as
// one (FailOpen here: the task runs on a fallback permit), not keep the
// task waiting for a lease that never comes. The client here answers every
// script call with that reply, as a Redis 6 replica does.
func TestWrappedFailureReplyIsAnOutage(t *testing.T) {
	addr := startRedis(t)
	c := holderClient(t, addr)
	c.AddHook(refuseScripts{replyError("ERR Error running script (call to f_0123): @user_script:4: " +
		"@user_script: 4: -READONLY You can't write against a read only replica.")})
	h, err := redislimit.New(c, redislimit.WithPrefix("t:"+t.Name()), redislimit.WithLeaseTTL(testTTL),
		redislimit.WithRenewInterval(testRenew), redislimit.WithPollInterval(testPoll),
		redislimit.WithFailurePolicy(redislimit.FailOpen))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4)}, h.Groups(2), nil)
	r, err := runOne(t, ex, "a")
	if err != nil || r.Status != executor.Success {
		t.Fatalf("task while Redis refuses writes, FailOpen: %v %v %v (stats %+v)", r.Status, r.Err, err, h.Stats())
	}
	if s := h.Stats(); s.Mode != redislimit.ModeDown || s.Fallbacks == 0 {
		t.Fatalf("stats %+v, want down with a fallback", s)
	}
}
