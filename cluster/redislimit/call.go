package redislimit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// call runs f, one call to Redis, with a context that ends after the op
// timeout, and returns when f does or when that context ends, whichever
// comes first. The client may not honour the context: go-redis, unless
// ContextTimeoutEnabled is set, bounds a call by its own ReadTimeout and
// WriteTimeout alone (5s by default, or never with -1). The holder does
// not wait for it: the call is abandoned, its result dropped (a lease an
// acquire was granted anyway is given back by its id: refilledLocked), and
// the goroutine running it ends when the client gives up. Close waits for
// it, for a bound (calls).
func call[T any](h *Holder, f func(ctx context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.opTimeout)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1) // buffered: an abandoned call does not block
	h.calls.add()
	go func() {
		defer h.calls.done()
		v, err := f(ctx)
		done <- result{v, err}
	}()
	if h.callWaitHook != nil {
		h.callWaitHook(ctx, func() bool { return len(done) > 0 })
	}
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		// Of two ready cases select takes either: a reply that came as
		// the timeout did is used, not counted as lost.
		select {
		case r := <-done:
			return r.v, r.err
		default:
		}
		var zero T
		return zero, &opTimeoutError{h.cfg.opTimeout}
	}
}

// inflight counts the goroutines running calls to Redis (call), those
// abandoned at the op timeout included, so that Close can wait for them.
type inflight struct {
	mu   sync.Mutex
	n    int
	none chan struct{} // closed when n comes to 0; nil when no one waits
}

func (f *inflight) add() {
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
}

func (f *inflight) done() {
	f.mu.Lock()
	if f.n--; f.n == 0 && f.none != nil {
		close(f.none)
		f.none = nil
	}
	f.mu.Unlock()
}

// wait returns once no call runs, or after d, whichever comes first; it
// reports whether no call runs.
func (f *inflight) wait(d time.Duration) bool {
	f.mu.Lock()
	if f.n == 0 {
		f.mu.Unlock()
		return true
	}
	if f.none == nil {
		f.none = make(chan struct{})
	}
	none := f.none
	f.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-none:
		return true
	case <-t.C:
		return false
	}
}

// opTimeoutError is a call the holder stopped waiting for.
type opTimeoutError struct{ d time.Duration }

func (e *opTimeoutError) Error() string {
	return fmt.Sprintf("redislimit: no reply within the op timeout %v", e.d)
}

func (e *opTimeoutError) Unwrap() error { return context.DeadlineExceeded }

// scriptCall is one script call of a pipeline; cmd holds its reply.
type scriptCall struct {
	s    *redis.Script
	keys []string // keys[0] is the limit key's leases key: it names the limit key
	args []any
	cmd  *redis.Cmd
	// afterKey: the call must reach Redis after the calls of its limit
	// key listed before it (an acquire after the give-backs that free
	// room for it). See runScripts.
	afterKey bool
}

// runScripts sends calls, and then whatever more adds, in one pipelined
// round trip (one per batch where calls must be ordered: see Order
// below), each call by its script's SHA1. The calls whose script Redis
// does not know (NOSCRIPT: the first call, or Redis restarted) are sent
// again with their script, in a second round trip. It returns the
// pipeline's error and counts its round trips; each call's reply is in its
// cmd, whatever became of the other calls (a reply of the first round trip
// stands when the second fails). The error is the first that says Redis
// failed (failed), from any round trip, else the first other one.
//
// Order. Redis may know one script and not another (flushed, then loaded
// again by another holder's call; a replica promoted after a failover),
// or lose them between two calls of one round trip: a call refused with
// NOSCRIPT runs only in the second round trip, after the calls listed
// after it that Redis did run. So a call marked afterKey is not sent in
// the round trip of an earlier call of its limit key, but in a round trip
// of its own once that one's calls (those re-sent too) have been answered:
// an acquire is never run before the give-back, listed before it, of a
// lease of its key (it would be refused for the room that give-back frees,
// and record its holder as waiting). That costs a round trip only for the
// batches that hold both (the give-back of a lease whose grant's reply was
// lost, or of permits above the holder's share, and a refill). When a
// round trip says that Redis failed, the later ones are not sent, and
// their calls carry its error.
func (h *Holder) runScripts(ctx context.Context, calls []*scriptCall, more func(p redis.Pipeliner)) error {
	var err error
	waves := inKeyOrder(calls)
	if len(waves) == 0 && more != nil {
		// No script call, only more's commands (the PING that probes
		// Redis while the holder is down): they are sent too, or the
		// probe would read as Redis's answer without ever reaching it.
		waves = [][]*scriptCall{nil}
	}
	for i, wave := range waves {
		if i > 0 && failed(err) {
			for _, c := range wave {
				c.cmd = redis.NewCmd(ctx)
				c.cmd.SetErr(err)
			}
			continue
		}
		err = worse(err, h.runRoundTrip(ctx, wave, more))
		more = nil
	}
	return err
}

// inKeyOrder splits calls into the batches runScripts sends one after the
// other: a call marked afterKey goes in the batch after that of the last
// call of its limit key listed before it; any other call, in that one's
// batch (or the first). Calls keep their order within a batch.
func inKeyOrder(calls []*scriptCall) [][]*scriptCall {
	var waves [][]*scriptCall
	last := make(map[string]int, len(calls)) // a limit key's latest batch so far
	for _, c := range calls {
		w, seen := last[c.keys[0]]
		if seen && c.afterKey {
			w++
		}
		if w == len(waves) {
			waves = append(waves, nil)
		}
		waves[w] = append(waves[w], c)
		last[c.keys[0]] = w
	}
	return waves
}

// runRoundTrip is one batch of runScripts: one round trip by the scripts'
// SHA1, and a second for the calls refused with NOSCRIPT.
func (h *Holder) runRoundTrip(ctx context.Context, calls []*scriptCall, more func(p redis.Pipeliner)) error {
	cmds, err := h.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, c := range calls {
			c.cmd = c.s.EvalSha(ctx, p, c.keys, c.args...)
		}
		if more != nil {
			more(p)
		}
		return nil
	})
	h.st.roundTrips.Add(1)
	var again []*scriptCall
	for _, c := range calls {
		if e := c.cmd.Err(); e != nil && redis.HasErrorPrefix(e, "NOSCRIPT") {
			again = append(again, c)
		}
	}
	// The pipeline's own error is its first call's: a script's error reply
	// (WRONGTYPE on one key) would hide a later call's reply that says
	// Redis cannot serve (NOPERM on another key, OOM, BUSY, READONLY...),
	// and the failure policy and the outage accounting would miss it. So
	// would a NOSCRIPT, which the second round trip makes good.
	first := worst(cmds, err)
	if len(again) == 0 {
		return first
	}
	cmds, err = h.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, c := range again {
			c.cmd = c.s.Eval(ctx, p, c.keys, c.args...)
		}
		return nil
	})
	h.st.roundTrips.Add(1)
	return worse(first, worst(cmds, err))
}

// worse is the error runScripts returns of two of its round trips': the
// first that says Redis failed (failed), else the first other one.
func worse(first, next error) error {
	if first == nil || failed(next) && !failed(first) {
		return next
	}
	return first
}

// worst is the error of a pipeline's cmds that runScripts returns: the
// first that says Redis failed (failed), else the first other one but
// NOSCRIPT; err, the pipeline's, when no cmd has one.
func worst(cmds []redis.Cmder, err error) error {
	var other error
	for _, c := range cmds {
		switch e := c.Err(); {
		case e == nil || redis.HasErrorPrefix(e, "NOSCRIPT"):
		case failed(e):
			return e
		case other == nil:
			other = e
		}
	}
	if other == nil && err != nil && !redis.HasErrorPrefix(err, "NOSCRIPT") {
		return err
	}
	return other
}
