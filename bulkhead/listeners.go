package bulkhead

import "github.com/groupexec/groupexec/internal/fanout"

// Listeners returns one Listener that calls each of ls, in order, for every
// event, so that a bulkhead can feed a metrics exporter (metrics/prom,
// metrics/otel) and a listener of its own: WithListener takes only one.
// Nil ones are skipped, and a Listeners among ls counts as its own
// listeners, in place. With none left it returns nil, which WithListener
// refuses; with one, that listener.
//
// Each listener hears every event, whatever the ones before it did. One
// that panics or exits the goroutine (runtime.Goexit) does not return to
// the loop: the listeners after it are called from a deferred function,
// and then the panic or the exit goes on, as for a single listener, once
// they have all heard the event. So the bulkhead recovers and ignores the
// panic, and an exit ends the goroutine that made the call. If several
// fail, one exit among them ends the goroutine; otherwise the last panic is
// the one that goes on.
func Listeners(ls ...Listener) Listener {
	return fanout.Of(ls, func(l Listener) ([]Listener, bool) {
		m, ok := l.(*listenerList)
		if !ok {
			return nil, false
		}
		return m.ls, true
	}, func(all []Listener) Listener { return &listenerList{ls: all} })
}

// listenerList is the Listener Listeners returns.
type listenerList struct{ ls []Listener }

func (m *listenerList) OnEvent(e Event) { fanout.Call(m.ls, Listener.OnEvent, e) }
