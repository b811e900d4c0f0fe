package executor

// The fairness window. Stats reports how far the last window was from the
// configured shares as Jain's fairness index, computed over the groups that
// had tasks waiting throughout that window.
//
// A window is a run of consecutive task starts (under the limits; CallerRuns
// tasks are not started by the executor): at least minFairWindow of them,
// and at least fairWindowPerGroup times the number of groups with tasks
// waiting when the window began, so that a window spans several turns of
// every waiting group. A group counts if its queue was never empty from the
// window's first start to its last. For each such group i, x_i is the
// permits it started in the window divided by its share, and the index is
//
//	J = (sum x_i)^2 / (n * sum x_i^2)
//
// 1 when every counted group was served exactly in proportion to its share,
// down to 1/n when one group got everything. A group held back by its own
// concurrency limit counts too: the index measures what the groups got
// against their shares, whatever the reason.
//
// Cost: one counter update per start, and at a window's end one pass over
// the groups with tasks waiting, which the window's length (at least
// fairWindowPerGroup starts per such group) makes O(1) amortised per start.

const (
	minFairWindow      = 256
	fairWindowPerGroup = 4
)

// Fairness describes the last completed fairness window in which at least one
// group had tasks waiting throughout.
type Fairness struct {
	// Index is Jain's fairness index of permits served per unit of share over
	// the counted groups: 1 is exactly proportional to the shares, 1/Groups
	// is one group served alone. 0 until such a window has completed.
	Index float64
	// Groups is the number of groups counted: those with tasks waiting
	// throughout the window.
	Groups int
	// Starts is the window's length, in task starts.
	Starts int
	// Windows counts the windows completed so far, counted groups or not.
	Windows uint64
}

type fairness struct {
	win    uint64 // the window under way, from 1
	left   int    // starts left in it
	length int    // its length in starts
	done   uint64 // windows completed
	last   Fairness
}

// reset begins the next window; waiting is the number of groups with tasks
// waiting.
func (f *fairness) reset(waiting int) {
	f.win++
	f.length = max(minFairWindow, fairWindowPerGroup*waiting)
	f.left = f.length
}

// countStartLocked counts a start of w permits by g: in the totals, and
// in the fairness window.
func (ex *Executor) countStartLocked(g *group, w int) {
	g.counts.Started++
	g.served += uint64(w)
	ex.counts.Started++
	ex.served += uint64(w)
	f := &ex.fair
	if g.winID != f.win {
		g.winID, g.winServed = f.win, 0
	}
	g.winServed += w
	if f.left--; f.left <= 0 { // once per f.length starts: the rest is out of line
		ex.endWindowLocked()
	}
}

// endWindowLocked closes the fairness window that countStartLocked filled.
func (ex *Executor) endWindowLocked() {
	f := &ex.fair
	var sum, sumSq float64
	n := 0
	for nd := ex.backlog.Front(); nd != nil; nd = nd.Next() {
		g := nd.Value
		if g.backlogWin >= f.win {
			continue // its queue was empty at some point in the window
		}
		x := 0.0
		if g.winID == f.win {
			x = float64(g.winServed) / float64(max(g.limits.Share, 1))
		}
		sum += x
		sumSq += x * x
		n++
	}
	f.done++
	if n > 0 {
		idx := 1.0 // every counted group got nothing: equal, if useless
		if sumSq > 0 {
			idx = sum * sum / (float64(n) * sumSq)
		}
		f.last = Fairness{Index: idx, Groups: n, Starts: f.length}
	}
	f.reset(ex.backlog.Len())
}
