package bulkhead_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
)

// exitInside runs f on a goroutine of its own and waits for it to end,
// whether it returns or a listener exits it.
func exitInside(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

// A listener told of a permit's issue that exits the goroutine of the
// acquire (runtime.Goexit, which no recover stops) ends it before the
// permit reaches the caller: the bulkhead takes the permit back, so that
// no one holds it and it is not lost.
func TestListenerGoexitOnIssueKeepsNoPermit(t *testing.T) {
	calls := []struct {
		name string
		call func(*bulkhead.Bulkhead)
	}{
		{"TryAcquire", func(b *bulkhead.Bulkhead) { _, _ = b.TryAcquire(bg, 1) }},
		{"Acquire", func(b *bulkhead.Bulkhead) { _, _ = b.Acquire(bg, 1) }},
		{"Submit", func(b *bulkhead.Bulkhead) {
			_, _ = bulkhead.Submit(b, bg, func(context.Context) (int, error) { return 0, nil })
		}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			var exit bool
			b := newBH(t, 1, bulkhead.WithQueue(1, time.Hour), bulkhead.WithEventLog(16),
				bulkhead.WithListener(bulkhead.ListenerFunc(func(e bulkhead.Event) {
					if exit && e.Code == bulkhead.EventPermitAcquired {
						runtime.Goexit()
					}
				})))
			exit = true
			exitInside(func() { c.call(b) })
			exit = false
			if n := b.InFlight(); n != 0 {
				t.Fatalf("%d in flight after the acquiring goroutine exited", n)
			}
			p := acquire(t, b, 1) // the permit was not lost
			release(t, b, p)
			if err := b.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A queued request whose context ends after its grant, before it looks,
// gives the permit back; a listener told of its rejection that exits the goroutine does not
// keep it from coming back.
func TestListenerGoexitOnGiveBackKeepsNoPermit(t *testing.T) {
	g := newGate()
	b := newBH(t, 1, bulkhead.WithQueue(1, time.Hour), bulkhead.WithListener(bulkhead.ListenerFunc(func(e bulkhead.Event) {
		g.OnEvent(e)
		if e.Code == bulkhead.EventRequestRejected {
			runtime.Goexit()
		}
	})))
	w, _ := grantAsItGivesUp(t, b, g)
	<-w.done
	if n := b.InFlight(); n != 0 {
		t.Fatalf("%d in flight after the request that gave up exited", n)
	}
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// A listener told that a request queued that exits the goroutine of the
// acquire ends the request before it waits: it leaves the queue, and a
// permit freed later goes to the next in line, not to the exited request.
func TestListenerGoexitOnQueueKeepsNoPermit(t *testing.T) {
	for _, code := range []string{bulkhead.EventAtCapacity, bulkhead.EventRequestQueued} {
		t.Run(code, func(t *testing.T) {
			var exit bool
			b := newBH(t, 1, bulkhead.WithQueue(2, time.Hour), bulkhead.WithEventLog(32),
				bulkhead.WithListener(bulkhead.ListenerFunc(func(e bulkhead.Event) {
					if exit && e.Code == code {
						runtime.Goexit()
					}
				})))
			held := acquire(t, b, 1)
			exit = true
			exitInside(func() { _, _ = b.Acquire(bg, 1) })
			exit = false
			release(t, b, held)
			if n := b.InFlight(); n != 0 {
				t.Fatalf("%d in flight after the queued goroutine exited and the only holder released", n)
			}
			if n := b.QueueDepth(); n != 0 {
				t.Fatalf("%d queued after the queued goroutine exited", n)
			}
			p := acquire(t, b, 1)
			release(t, b, p)
			if err := b.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A request granted its permit while a listener told of its queueing runs,
// then ended by that listener (runtime.Goexit), gives the permit back; its
// rejection is logged with ErrGoexit's stable code, as when it leaves the
// queue ungranted, not with the error's text.
func TestListenerGoexitAfterGrantLogsTheCode(t *testing.T) {
	var held bulkhead.Permit
	var b *bulkhead.Bulkhead
	b = newBH(t, 1, bulkhead.WithQueue(2, time.Hour), bulkhead.WithEventLog(32),
		bulkhead.WithListener(bulkhead.ListenerFunc(func(e bulkhead.Event) {
			if e.Code == bulkhead.EventRequestQueued {
				release(t, b, held) // grants the request being told of
				runtime.Goexit()
			}
		})))
	held = acquire(t, b, 1)
	exitInside(func() { _, _ = b.Acquire(bg, 1) })
	if n := b.InFlight(); n != 0 {
		t.Fatalf("%d in flight after the granted request's goroutine exited", n)
	}
	var last bulkhead.Event
	for _, e := range b.Events() {
		if e.Code == bulkhead.EventRequestRejected {
			last = e
		}
	}
	if last.Detail != "RB_ERR_GOEXIT" {
		t.Errorf("rejection logged with detail %q, want RB_ERR_GOEXIT", last.Detail)
	}
}
