package redislimit_test

import (
	"sync"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/cluster/redislimit/redistest"
)

// TestProbeWhileDownAsksRedis: a holder that went down with no lease
// stays down through a renewal round while Redis is still gone. The round
// probes Redis (a PING): a probe that never reached Redis would read as an
// answer, and the holder would report an outage over (EventRecovered,
// ModeUp) while Redis still cannot be reached, its tasks waiting for
// refills again rather than meeting the failure policy.
func TestProbeWhileDownAsksRedis(t *testing.T) {
	srv := redistest.Start(t)
	var mu sync.Mutex
	var recovered int
	h := newHolder(t, srv.Addr(), append(manualRenewals(), redislimit.WithListener(func(e redislimit.Event) {
		if e.Kind == redislimit.EventRecovered {
			mu.Lock()
			recovered++
			mu.Unlock()
		}
	}))...)
	l := h.Groups(1)
	attach(t, l)
	srv.Stop()
	if p, err := l.TryAcquire("g", 1); p != nil || err != nil {
		t.Fatalf("TryAcquire with no lease: %v, %v", p, err)
	}
	// The refill fails, and is asked again at the poll rate: three
	// failures in a row bring the holder down.
	eventually(t, "the holder is down", 30*time.Second, func() bool { return h.Stats().Mode == redislimit.ModeDown })
	if s := h.Stats(); s.Leases != 0 {
		t.Fatalf("the holder holds %d leases", s.Leases)
	}
	redislimit.RenewNow(h) // the probe: Redis is still stopped
	s := h.Stats()
	mu.Lock()
	defer mu.Unlock()
	if s.Mode != redislimit.ModeDown || s.Outages != 1 || recovered != 0 {
		t.Fatalf("after a probe of a stopped Redis: mode %v, outages %d, %d EventRecovered; want down, 1, 0",
			s.Mode, s.Outages, recovered)
	}
}
