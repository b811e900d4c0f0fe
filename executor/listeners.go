package executor

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
	var all []Listener
	for _, l := range ls {
		switch l := l.(type) {
		case nil:
		case *listenerList:
			all = append(all, l.ls...)
		default:
			all = append(all, l)
		}
	}
	switch len(all) {
	case 0:
		return nil
	case 1:
		return all[0]
	}
	return &listenerList{ls: all}
}

// listenerList is the Listener Listeners returns. A pointer, so that it
// compares as any Listener does.
type listenerList struct{ ls []Listener }

func (m *listenerList) OnSubmitted(e Event) { m.from(0, onSubmitted, e) }
func (m *listenerList) OnStarted(e Event)   { m.from(0, onStarted, e) }
func (m *listenerList) OnCompleted(e Event) { m.from(0, onCompleted, e) }
func (m *listenerList) OnRejected(e Event)  { m.from(0, onRejected, e) }

// from calls f for the listeners from the i-th on.
func (m *listenerList) from(i int, f func(Listener, Event), e Event) {
	for ; i < len(m.ls); i++ {
		m.one(i, f, e)
	}
}

// one calls f for the i-th listener. If the call does not return, a panic
// or a runtime.Goexit, which the deferred call can tell apart from a return
// but not stop (a recover would hide the panic, and nothing stops an exit),
// the listeners after it are called first.
func (m *listenerList) one(i int, f func(Listener, Event), e Event) {
	returned := false
	defer func() {
		if !returned {
			m.from(i+1, f, e)
		}
	}()
	f(m.ls[i], e)
	returned = true
}
