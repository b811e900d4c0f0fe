package redislimit_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
)

// TestGiveBackReachesRedisBeforeTheAcquireOfItsKey: Redis grants a block
// of a limit-1 key and the reply is lost; then Redis loses its scripts
// (SCRIPT FLUSH, or a failover to a replica that never ran them) and
// another holder's refill loads the acquire script again, but not the one
// that gives leases back. The holder's next call for the key gives the
// lost lease back by its id and asks for the key: the give-back's script
// is unknown to Redis (NOSCRIPT) and the acquire's is known. Sent in one
// round trip, the acquire would run first and be refused for the slot the
// lost lease still holds (recording the holder as waiting, a contention
// every holder of the key hears of), and the give-back only after it, sent
// again with its script. The give-back reaches Redis first: the acquire is
// granted the slot it frees, with no refusal.
func TestGiveBackReachesRedisBeforeTheAcquireOfItsKey(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flush bool // the scripts were loaded, then flushed; else never loaded
	}{{"script flushed", true}, {"script never loaded", false}} {
		t.Run(tc.name, func(t *testing.T) {
			addr := startRedis(t) // its own: the test decides what Redis knows
			c := newClient(t, addr)
			h := newHolder(t, addr, longLease...)
			l := h.Groups(1)
			n := attach(t, l)
			if tc.flush {
				if err := redislimit.LoadReleaseScript(bg, c); err != nil {
					t.Fatal(err)
				}
			}
			var lost atomic.Bool
			redislimit.SetReplyHook(h, func() error {
				if !lost.CompareAndSwap(false, true) {
					return nil
				}
				if tc.flush {
					if err := c.ScriptFlush(bg).Err(); err != nil {
						return err
					}
				}
				// Another holder's refill loads the acquire script again.
				if err := redislimit.LoadAcquireScript(bg, c); err != nil {
					return err
				}
				return errors.New("a lost reply (test)")
			})
			p := acquire(t, l, n, "g", 1, 30*time.Second)
			defer p.Release()
			if !lost.Load() {
				t.Fatal("no reply was lost")
			}
			if s := h.Stats(); s.RefillsDenied != 0 || s.Refills != 1 {
				t.Fatalf("refills %d, refused %d; want the lost lease given back before the key was asked for again: "+
					"granted at once", s.Refills, s.RefillsDenied)
			}
			if m, err := c.ZCard(bg, "t:"+t.Name()+":{group:g}:l").Result(); err != nil || m != 1 {
				t.Fatalf("leases of the key in Redis: %d (%v), want 1, the task's", m, err)
			}
		})
	}
}
