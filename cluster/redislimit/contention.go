package redislimit

import (
	"context"
	"strings"
	"time"
)

// Contention. A holder refused a block publishes it (acquireScript), and
// every holder listens on one channel per prefix: a holder of the key that
// hears it gives back the permits no task is using and, from then on, those
// above an even share as its tasks finish (Release). Without it a holder
// would learn that others wait only at its next renewal round, and a busy or
// finished process could keep capacity idle for a renew interval.

func (h *Holder) channel() string { return h.cfg.prefix + ":contention" }

func (h *Holder) subscriber() {
	defer h.wg.Done()
	ctx := context.Background()
	ps := h.rdb.Subscribe(ctx, h.channel())
	// A blocked receive does not end with a context: closing the
	// subscription ends it.
	closed := make(chan struct{})
	go func() {
		<-h.stop
		_ = ps.Close()
		close(closed)
	}()
	defer func() { <-closed }()
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
		who, leasesKey, ok := strings.Cut(msg.Payload, "|")
		if !ok {
			continue
		}
		h.mu.Lock()
		for _, l := range h.scopes {
			if who == l.id {
				continue // its own refusal
			}
			for _, ks := range l.keys {
				if ks.keys[0] == leasesKey && len(ks.leases) > 0 {
					ks.others = max(ks.others, 1)
					ks.giveUp, ks.contended = true, true
					h.enqueueLocked(ks)
				}
			}
		}
		h.mu.Unlock()
	}
}
