package gateway

import (
	"sync/atomic"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// maxRetryAfter bounds the Retry-After of a refusal for lack of room: an
// estimate further out than this is not worth acting on.
const maxRetryAfter = time.Minute

// serviceTime is an exponentially weighted mean of how long admitted
// requests hold their slot (weight 1/8 per request): the drain rate of a
// queue is its concurrency over it.
type serviceTime struct{ ns atomic.Int64 }

func (s *serviceTime) observe(d time.Duration) {
	for {
		old := s.ns.Load()
		next := old + (int64(d)-old)/8
		if old == 0 {
			next = int64(d)
		}
		if s.ns.CompareAndSwap(old, next) {
			return
		}
	}
}

// queueRetryAfter estimates when a request the executor refused for lack
// of room would fit: the time for the requests ahead of it (what the limit
// that refused had in use) to drain at the limit's concurrency, one mean
// service time per round. A queue timeout reads the group's queue.
func (g *Gateway) queueRetryAfter(re *executor.RejectedError, pol *policy.Policy) time.Duration {
	ahead, conc := re.Used, 0
	switch re.Limit {
	case executor.LimitGroupInFlight, executor.LimitGroupQueue, executor.LimitGroupConcurrency:
		if l, err := pol.Group(re.Group); err == nil {
			conc = l.MaxConcurrency
		}
	case executor.LimitGlobalInFlight, executor.LimitGlobalQueue:
		conc = pol.GlobalMaxInFlight()
	case executor.LimitQueueTimeout:
		if st, ok := g.ex.GroupStats(re.Group); ok {
			ahead, conc = st.InFlight, st.MaxConcurrency
		}
	default:
		return time.Second
	}
	conc = min(max(conc, 1), max(ahead, 1))
	rounds := (ahead + conc) / conc // this request's round, counting from 1
	return min(max(time.Duration(rounds)*time.Duration(g.svc.ns.Load()), time.Second), maxRetryAfter)
}
