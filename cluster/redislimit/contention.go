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
//   - "c|holder|leases_key|version|holder=cap[w|d],...": a holder was
//     refused a block of the key, or granted one while others wait
//     (acquireScript); with no contender listed, the last waiter ended its
//     record, or was granted what it waited for (unwaitScript,
//     acquireScript), and nobody waits any more. Every contender is listed
//     with its cap, and marked 'w' if it waits, 'd' if it waits for room
//     below its cap (deprived) (scripts.go, Notices). Each holder of the
//     key learns how many other holders wait (the holders marked, not
//     itself: a grant leaves waiting maybe the listener alone), how many
//     of them are deprived, and the most it may keep meanwhile
//     (its cap); it gives back what it holds above the cap (once its
//     quantum is over) and, while someone waits below its cap, what no
//     task holds (limiter.go). A holder Redis refused for its share, with
//     or without permits of the key, asks again when a notice gives it a
//     cap that fits what it waits for. Without it a holder would learn
//     that others wait, or that its cap rose, only at its next renewal
//     round. Nothing orders the notices with the replies to the holder's
//     own calls: one older than what the holder last heard of the key (its
//     version) is ignored (scripts.go). A "w|..." notice of an older build,
//     which did not say who waits, is ignored as a missed one.
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
	var who, leasesKey, caps string
	var ver int64
	switch kind {
	case "c":
		// The leases key holds the executor's key, which may contain
		// '|'; the other fields cannot (holder ids, numbers): so the
		// holder is cut from the front, the version and the contenders
		// from the back.
		var ok bool
		if who, rest, ok = strings.Cut(rest, "|"); !ok {
			return
		}
		i := strings.LastIndexByte(rest, '|')
		j := strings.LastIndexByte(rest[:max(i, 0)], '|')
		if j < 0 {
			return
		}
		v, err := strconv.ParseInt(rest[j+1:i], 10, 64)
		if err != nil {
			return
		}
		leasesKey, ver, caps = rest[:j], v, rest[i+1:]
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
			// contention that is over until its next renewal round.
			continue
		}
		sh, parsed := sharesOf(caps, l.id)
		if !parsed {
			continue
		}
		held, _ := ks.held()
		fitted := capFits(held, ks.demand, ks.cap)
		ks.ver = ver
		ks.others, ks.deprived = sh.others, sh.deprived
		switch {
		case sh.others == 0:
			// Nobody else waits (the last waiter ended its record, or
			// was granted, or this holder alone still waits): no one
			// caps it, as a reply would say.
			ks.cap = ks.limit
		case sh.listed:
			ks.cap = sh.cap
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

// noticeShares is what a contention notice tells one holder of a key.
type noticeShares struct {
	others   int  // holders other than it that wait
	deprived int  // how many of them wait for room below their cap
	cap      int  // its cap, if listed
	listed   bool // it is a contender of the notice
}

// sharesOf reads the contenders of a notice, "holder=cap[w|d],...", as
// the holder id hears them; ok is false if they do not parse.
func sharesOf(contenders, id string) (sh noticeShares, ok bool) {
	for contenders != "" {
		var one string
		one, contenders, _ = strings.Cut(contenders, ",")
		h, c, found := strings.Cut(one, "=")
		if !found || c == "" {
			return noticeShares{}, false
		}
		state := c[len(c)-1]
		if state == 'w' || state == 'd' {
			c = c[:len(c)-1]
		}
		n, err := strconv.Atoi(c)
		if err != nil {
			return noticeShares{}, false
		}
		switch {
		case h == id:
			sh.cap, sh.listed = n, true
		case state == 'd':
			sh.others++
			sh.deprived++
		case state == 'w':
			sh.others++
		}
	}
	return sh, true
}
