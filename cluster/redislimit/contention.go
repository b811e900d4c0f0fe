package redislimit

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Contention. Every holder listens on one channel per prefix for two
// notices:
//
//   - "w|holder|leases_key|version|deprived|holder=cap,...": a holder was
//     refused a block of the key, or granted one while others wait
//     (acquireScript); with no caps, the last waiter ended its record, or
//     was granted what it waited for (unwaitScript, acquireScript), and
//     nobody waits any more. Each holder of the key learns that someone
//     waits, how many wait below their cap, and the most it may keep meanwhile
//     (its cap); it gives back what it holds above the cap (once its
//     quantum is over) and, while someone waits below its cap, what no
//     task holds (limiter.go). A holder Redis refused for its share, with
//     or without permits of the key, asks again when a notice gives it a
//     cap that fits what it waits for. Without it a holder would learn
//     that others wait, or that its cap rose, only at its next renewal
//     round. Nothing orders the notices with the replies to the holder's
//     own calls: one older than what the holder last heard of the key (its
//     version) is ignored (scripts.go).
//   - "f|leases_key": permits of the key were freed while others wait: a
//     holder gave them back (releaseScript), ended its waiting record
//     (unwaitScript), or a request or renewal reclaimed the slots of
//     expired leases (acquireScript, renewScript). Each holder Redis
//     refused asks again now (at
//     most once per poll interval), instead of polling. One heard while a
//     refill of the key is on its way may tell of permits freed after
//     Redis refused it: a refusal used after such a notice asks again too.
//
// A notice missed (a dropped subscription) costs at most one renew
// interval: the renewal round reports waiters and caps, and asks again for
// the keys still refused.

func (h *Holder) channel() string { return h.cfg.prefix + ":contention" }

func (h *Holder) subscriber() {
	defer close(h.subDone)
	// Ended by Close: it ends a connection being dialled.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A blocked receive does not end with a context: closing the
	// subscription ends it. Nothing ends a connection's set-up waiting for
	// a Redis that accepted it but does not answer: the client's read
	// timeout does, and Close does not wait for it longer than for a call
	// (finishClose).
	subs := make(chan *redis.PubSub, 1)
	closed := make(chan struct{})
	go func() {
		<-h.stop
		cancel()
		_ = (<-subs).Close()
		close(closed)
	}()
	defer func() { <-closed }()
	ps := h.rdb.Subscribe(ctx, h.channel()) // failed, it is made again by the next receive
	subs <- ps
	for {
		msg, err := ps.ReceiveMessage(ctx)
		select {
		case <-h.stop:
			return
		default:
		}
		if err != nil {
			// Redis is down or restarting: the renewal loop reports it;
			// the subscription is made again on the next receive.
			select {
			case <-h.stop:
				return
			case <-time.After(h.cfg.poll):
			}
			continue
		}
		h.hear(msg.Payload)
	}
}

// hear handles one contention notice.
func (h *Holder) hear(payload string) {
	kind, rest, _ := strings.Cut(payload, "|")
	var who, leasesKey, deprived, caps string
	var ver int64
	switch kind {
	case "w":
		// The leases key holds the executor's key, which may contain
		// '|'; the other fields cannot (holder ids, numbers): so the
		// holder is cut from the front, the version, counts and caps
		// from the back.
		var ok bool
		if who, rest, ok = strings.Cut(rest, "|"); !ok {
			return
		}
		i := strings.LastIndexByte(rest, '|')
		j := strings.LastIndexByte(rest[:max(i, 0)], '|')
		k := strings.LastIndexByte(rest[:max(j, 0)], '|')
		if k < 0 {
			return
		}
		v, err := strconv.ParseInt(rest[k+1:j], 10, 64)
		if err != nil {
			return
		}
		leasesKey, ver, deprived, caps = rest[:k], v, rest[j+1:i], rest[i+1:]
	case "f":
		leasesKey = rest
	default:
		return
	}
	scope, name, ok := h.parseLeasesKey(leasesKey)
	if !ok {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, l := range h.scopes {
		if l.scope != scope {
			continue
		}
		ks := l.byNameLocked(name)
		if ks == nil {
			continue
		}
		if kind == "f" {
			// Heard while a refill is on its way, it may tell of permits
			// freed after Redis refused it: the refusal then asks again
			// (refilledLocked).
			ks.freed = true
			h.askAgainLocked(ks)
			continue
		}
		if ver <= ks.ver || who == l.id && caps != "" {
			// Older news, or its own refusal or grant: the reply to its
			// call told it the same, as of the same version. Not its own
			// end of the last wait (unwaitScript), whose reply tells no
			// share: without it, the holder would keep the caps of a
			// contention that is over, and count others as waiting
			// (heard from a grant while it waited), until its next
			// renewal round.
			continue
		}
		held, _ := ks.held()
		fitted := capFits(held, ks.demand, ks.cap)
		ks.ver = ver
		switch {
		case caps == "":
			// The last waiter ended its record: nobody waits, and no one
			// is capped.
			ks.others, ks.deprived, ks.cap = 0, 0, ks.limit
		default:
			ks.others = max(ks.others, 1)
			if c, ok := capOf(caps, l.id); ok {
				ks.cap = c
			}
			if d, err := strconv.Atoi(deprived); err == nil {
				ks.deprived = d
			}
		}
		if !fitted && capFits(held, ks.demand, ks.cap) {
			// Refused for its share, it may have it now (a grant moved
			// another holder to the back of the line): it asks again,
			// holding permits of the key or not. Only when the cap comes
			// to fit: waiters refused for room would otherwise answer
			// every refusal. (Heard while a refill is on its way, its
			// refusal asks again: refilledLocked.)
			h.askAgainLocked(ks)
		}
		if len(ks.leases) == 0 || ks.others == 0 {
			continue // nothing to give back
		}
		ks.giveUp = true
		h.enqueueLocked(ks)
	}
}

// parseLeasesKey returns the scope and the key's name (keyName) of a leases
// key, PREFIX:{SCOPE:NAME}:l.
func (h *Holder) parseLeasesKey(k string) (scope, name string, ok bool) {
	k, ok = strings.CutPrefix(k, h.cfg.prefix+":{")
	if !ok {
		return "", "", false
	}
	if k, ok = strings.CutSuffix(k, "}:l"); !ok {
		return "", "", false
	}
	return strings.Cut(k, ":")
}

// capOf finds id's cap in "holder=cap,...".
func capOf(caps, id string) (int, bool) {
	for caps != "" {
		var one string
		one, caps, _ = strings.Cut(caps, ",")
		if h, c, ok := strings.Cut(one, "="); ok && h == id {
			n, err := strconv.Atoi(c)
			return n, err == nil
		}
	}
	return 0, false
}
