package executor

import (
	"context"
	"sync"
	"testing"
)

// Done racing with publish: every channel Done hands out is closed once the
// publisher has closed what publish returned, whichever side wins, and a
// second publish changes nothing.
func TestDoneRacesPublish(t *testing.T) {
	const rounds, askers = 20000, 3
	for i := range rounds {
		h := new(Handle[int])
		h.body = h // as Submit sets it
		got := make([]<-chan struct{}, askers)
		var wg sync.WaitGroup
		for k := range askers {
			wg.Go(func() { got[k] = h.Done() })
		}
		wg.Go(func() {
			ch, ok := h.publish(Success, nil, 1, 2)
			if !ok {
				t.Errorf("round %d: the first publish failed", i)
			}
			if ch != nil {
				close(ch)
			}
		})
		wg.Wait()
		for k, c := range got {
			select {
			case <-c:
			default:
				t.Fatalf("round %d: asker %d's Done channel is not closed after publish", i, k)
			}
		}
		if got[0] != got[1] && got[0] != closedChan && got[1] != closedChan {
			t.Fatalf("round %d: two askers got two different open channels", i)
		}
		if !h.done.Load() || h.status != Success || h.duration != 2 {
			t.Fatalf("round %d: outcome not published: done %v status %v", i, h.done.Load(), h.status)
		}
		before := doubleCompletions.Load()
		if _, ok := h.publish(Failed, nil, 0, 0); ok || h.status != Success {
			t.Fatalf("round %d: a second publish took effect", i)
		}
		doubleCompletions.Add(before - doubleCompletions.Load()) // this one was on purpose
		if h.Done() != closedChan {
			t.Fatalf("round %d: Done after completion is not the shared closed channel", i)
		}
	}
}

// A publish that falls between Done's two steps (the channel stored, not
// yet announced) completes the handle without closing that channel, and
// Done then returns the shared closed channel. A Done that announced before
// storing would make that publish find the announcement with no channel.
func TestPublishBetweenDoneSteps(t *testing.T) {
	h := new(Handle[int])
	h.body = h
	var published, ok bool
	var ch chan struct{}
	testHookDoneStored = func() {
		testHookDoneStored = nil // once: Done is not re-entered
		ch, ok = h.publish(Success, nil, 1, 2)
		published = true
	}
	defer func() { testHookDoneStored = nil }()
	got := h.Done()
	if !published || !ok {
		t.Fatalf("the hook's publish ran %v, took effect %v", published, ok)
	}
	if ch != nil {
		t.Fatalf("publish returned a channel to close, though Done had not announced one")
	}
	if got != closedChan {
		t.Fatalf("Done returned its own channel after the publish, not the shared closed one")
	}
	select {
	case <-got:
	default:
		t.Fatalf("Done's channel is open after the handle completed")
	}

	// And the other order: announced, then published: publish hands the
	// channel back to be closed.
	h2 := new(Handle[int])
	h2.body = h2
	c2 := h2.Done()
	ch2, ok2 := h2.publish(Success, nil, 1, 2)
	if !ok2 || ch2 == nil || (<-chan struct{})(ch2) != c2 {
		t.Fatalf("publish after Done announced: channel %v (Done's %v), ok %v", ch2, c2, ok2)
	}
}

// A Go task has no handle, so publish marks it completed in one step; it
// must still complete once only, and count a second try.
func TestGoTaskPublishesOnce(t *testing.T) {
	task := newGoTask(context.Background(), nil, true)
	ch, ok := task.publish(Success, nil, 0, 0)
	if !ok || ch != nil {
		t.Fatalf("first publish: ok %v, chan %v; want true, nil", ok, ch)
	}
	before := doubleCompletions.Load()
	if _, ok := task.publish(Failed, nil, 0, 0); ok {
		t.Fatal("a second publish took effect")
	}
	if got := doubleCompletions.Load() - before; got != 1 {
		t.Fatalf("second publish counted %d double completions, want 1", got)
	}
	doubleCompletions.Add(-1) // that one was on purpose
}

// cancelContext reports a cancel only the first time, and only while Fn
// may still see its context: once endRun has marked the run ended, a
// cancel changes nothing Fn can observe.
func TestCancelContextReports(t *testing.T) {
	live := job{g: &group{}}
	if !live.cancelContext(context.Canceled) {
		t.Error("the first cancel of a live run reported false")
	}
	if live.cancelContext(context.Canceled) {
		t.Error("a second cancel reported true")
	}
	ended := job{g: &group{}}
	ended.extra().ended = true
	if ended.cancelContext(context.Canceled) {
		t.Error("a cancel after the run ended reported true")
	}
}
