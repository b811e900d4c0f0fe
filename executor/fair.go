package executor

import "sync/atomic"

// The fairness window. Stats reports how far the last window was from the
// configured shares as Jain's fairness index, computed over the groups that
// had tasks waiting throughout that window.
//
// A window is a run of consecutive task starts made by the dispatcher,
// which makes every start while groups wait for global room (dispatch.go):
// fairness is between groups contending for the global limit, and while
// none waits for it, every group gets what its own limits allow and no
// window advances. A window is at least minFairWindow starts long, and at
// least fairWindowPerGroup times the number of groups that waited for
// global room when it began, so that it spans several turns of each. A
// group counts if it waited for global room in the window (the dispatcher
// knows it) and its queue was never empty from the window's first start to
// its last. For each such group i, x_i is the
// permits it started in the window divided by its share, and the index is
//
//	J = (sum x_i)^2 / (n * sum x_i^2)
//
// 1 when every counted group was served exactly in proportion to its share,
// down to 1/n when one group got everything. A group held back by its own
// concurrency limit counts too: the index measures what the groups got
// against their shares, whatever the reason.
//
// Cost: one counter update per dispatched start, and at a window's end one
// pass over the groups known to the dispatcher, which the window's length
// (at least fairWindowPerGroup starts per such group) makes O(1) amortised
// per start.

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
	// win numbers the window under way from its first start, from 1 (0
	// before the first): read by groups whose queue fills, so that one
	// filled before the window's first start, numbered as the window
	// before, counts as waiting throughout it.
	win    atomic.Uint64
	left   int    // starts left in it
	length int    // its length in starts
	done   uint64 // windows completed
	last   Fairness
}

// reset makes ready the next window, numbered at its first start
// (countFairLocked); waiting is the number of groups that waited for
// global room.
func (f *fairness) reset(waiting int) {
	f.length = max(minFairWindow, fairWindowPerGroup*waiting)
	f.left = f.length
}

// countFairLocked counts a dispatched start of w permits by g in the
// fairness window (the dispatcher's mutex held), and reports whether the
// window is full: the caller then ends it (endWindowLocked), once it has
// released g's mutex.
func (ex *Executor) countFairLocked(g *group, w int) (full bool) {
	f := &ex.disp.fair
	if f.left == f.length {
		// The window's first start numbers it: a group whose queue
		// filled before, numbered as the window before, waits throughout
		// it. Numbered as the window before ended (or by New), a window
		// whose starts began after the groups' queues filled, as the
		// executor's first does, counted none of them.
		f.win.Add(1)
	}
	if win := f.win.Load(); g.winID != win {
		g.winID, g.winServed = win, 0
	}
	g.winServed += w
	f.left--
	return f.left <= 0
}

// endWindowLocked closes the fairness window that countFairLocked filled
// (the dispatcher's mutex held; each group's is taken in turn). Groups with
// nothing waiting leave the dispatcher's known list.
func (ex *Executor) endWindowLocked() {
	d := &ex.disp
	f := &d.fair
	win := f.win.Load()
	var sum, sumSq float64
	n := 0
	for nd := d.known.Front(); nd != nil; {
		g := nd.Value
		nd = nd.Next()
		g.mu.Lock()
		switch {
		case g.queued() == 0 || g.dead:
			d.known.Remove(&g.knownNode)
			g.known = false
		case g.backlogWin < win: // waiting throughout the window
			x := 0.0
			if g.winID == win {
				x = float64(g.winServed) / float64(max(g.limits.Share, 1))
			}
			sum += x
			sumSq += x * x
			n++
		}
		g.mu.Unlock()
	}
	f.done++
	if n > 0 {
		idx := 1.0 // every counted group got nothing: equal, if useless
		if sumSq > 0 {
			idx = sum * sum / (float64(n) * sumSq)
		}
		f.last = Fairness{Index: idx, Groups: n, Starts: f.length}
	}
	f.reset(d.known.Len())
}

// forget takes g, dropped, out of the dispatcher's known list, if it is
// there (no lock held).
func (ex *Executor) forget(g *group) {
	d := &ex.disp
	d.mu.Lock()
	g.mu.Lock()
	if g.known {
		d.known.Remove(&g.knownNode)
		g.known = false
	}
	g.mu.Unlock()
	d.mu.Unlock()
}

// fairness returns the last completed window.
func (ex *Executor) fairness() Fairness {
	d := &ex.disp
	d.mu.Lock()
	defer d.mu.Unlock()
	f := d.fair.last
	f.Windows = d.fair.done
	return f
}
