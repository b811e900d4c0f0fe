package bulkhead

import (
	"slices"
	"sync"
	"time"
)

// latencyWindow keeps the latest samples in a ring.
type latencyWindow struct {
	mu   sync.Mutex
	buf  []time.Duration
	next int
	n    int // samples kept, up to len(buf)
}

func (w *latencyWindow) add(d time.Duration) {
	w.mu.Lock()
	w.buf[w.next] = d
	w.next = (w.next + 1) % len(w.buf)
	w.n = min(w.n+1, len(w.buf))
	w.mu.Unlock()
}

// p99 is the nearest-rank 99th percentile: the ceil(0.99 n)-th smallest of
// the n samples kept. It depends only on the samples, not their order.
func (w *latencyWindow) p99() (time.Duration, bool) {
	w.mu.Lock()
	s := make([]time.Duration, w.n)
	copy(s, w.buf[:w.n]) // before the ring wraps, the samples are buf[:n]; after, all of buf
	w.mu.Unlock()
	if len(s) == 0 {
		return 0, false
	}
	slices.Sort(s)
	rank := (99*len(s) + 99) / 100 // ceil(0.99 n), in integers so no float rounding decides it
	return s[rank-1], true
}

// RecordLatency records how long one operation took, for P99 and
// WithinTarget; a negative d counts as 0. Submit records each run itself.
func (b *Bulkhead) RecordLatency(d time.Duration) {
	d = max(d, 0)
	b.latency.add(d)
	if b.observed {
		es := new(events)
		var stamp int64
		if !b.realClk {
			stamp = b.read() // holding nothing (read)
		}
		b.mu.Lock()
		if !b.realClk {
			b.now = b.advance(stamp)
		}
		b.record(es, Event{Code: EventLatencyReport, Time: b.at(b.stamp()), Latency: d})
		b.mu.Unlock()
		b.deliver(es)
	}
}

// P99 returns the 99th percentile (nearest rank) of the latest recorded
// latencies, the last DefaultLatencyWindow by default (WithLatencyWindow); ok
// is false when none were recorded. The same samples always give the same
// answer.
func (b *Bulkhead) P99() (p99 time.Duration, ok bool) { return b.latency.p99() }

// WithinTarget reports whether P99 is at or below the latency target. It is
// true with no samples, and always without a target (WithLatencyTarget).
func (b *Bulkhead) WithinTarget() bool {
	if b.target == 0 {
		return true
	}
	p, ok := b.P99()
	return !ok || p <= b.target
}
