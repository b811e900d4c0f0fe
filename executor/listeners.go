package executor

import "github.com/groupexec/groupexec/internal/fanout"

// Listeners returns one Listener that calls each of ls, in order, for every
// event, so that an executor can feed a metrics collector (metrics/prom,
// metrics/otel) and listeners of its own: WithListener takes only one.
// Nil ones are skipped, and a Listeners among ls counts as its own
// listeners, in place. With none left it returns nil, which WithListener
// takes as no listener; with one, that listener.
//
// Each listener hears every event, whatever the ones before it did. One
// that panics or exits the goroutine (runtime.Goexit) does not return to
// the loop: the listeners after it are called from a deferred function,
// and then the panic or the exit goes on, as for a single listener, once
// they have all heard the event. So the executor recovers and ignores the
// panic, and an exit ends the goroutine that made the call (Listener). If
// several fail, one exit among them ends the goroutine; otherwise the last
// panic is the one that goes on.
func Listeners(ls ...Listener) Listener {
	return fanout.Of(ls, func(l Listener) ([]Listener, bool) {
		m, ok := l.(*listenerList)
		if !ok {
			return nil, false
		}
		return m.ls, true
	}, func(all []Listener) Listener { return &listenerList{ls: all} })
}

// listenerList is the Listener Listeners returns. A pointer, so that it
// compares as any Listener does.
type listenerList struct{ ls []Listener }

func (m *listenerList) OnSubmitted(e Event) { fanout.Call(m.ls, onSubmitted, e) }
func (m *listenerList) OnStarted(e Event)   { fanout.Call(m.ls, onStarted, e) }
func (m *listenerList) OnCompleted(e Event) { fanout.Call(m.ls, onCompleted, e) }
func (m *listenerList) OnRejected(e Event)  { fanout.Call(m.ls, onRejected, e) }
