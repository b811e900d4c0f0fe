package bulkhead

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

// listenerList is the Listener Listeners returns.
type listenerList struct{ ls []Listener }

func (m *listenerList) OnEvent(e Event) { m.from(0, e) }

// from calls the listeners from the i-th on.
func (m *listenerList) from(i int, e Event) {
	for ; i < len(m.ls); i++ {
		m.one(i, e)
	}
}

// one calls the i-th listener. If the call does not return, a panic or a
// runtime.Goexit, which the deferred call can tell apart from a return but
// not stop (a recover would hide the panic, and nothing stops an exit), the
// listeners after it are called first.
func (m *listenerList) one(i int, e Event) {
	returned := false
	defer func() {
		if !returned {
			m.from(i+1, e)
		}
	}()
	m.ls[i].OnEvent(e)
	returned = true
}
