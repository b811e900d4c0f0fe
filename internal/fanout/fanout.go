// Package fanout calls several listeners as one: in order, each of them
// whatever the ones before it did. executor.Listeners and
// bulkhead.Listeners are built on it.
package fanout

// Of returns one listener for ls: the zero L (none) if Flatten leaves no
// listener, the one it leaves, or wrap's list of them all.
func Of[L comparable](ls []L, inner func(L) ([]L, bool), wrap func([]L) L) L {
	all := Flatten(ls, inner)
	switch len(all) {
	case 0:
		var none L
		return none
	case 1:
		return all[0]
	}
	return wrap(all)
}

// Flatten returns ls without its nil listeners, and with the listeners of
// each one that inner reports to be a list itself in its place.
func Flatten[L comparable](ls []L, inner func(L) ([]L, bool)) []L {
	var none L
	var all []L
	for _, l := range ls {
		if l == none {
			continue
		}
		if in, ok := inner(l); ok {
			all = append(all, in...)
			continue
		}
		all = append(all, l)
	}
	return all
}

// Call calls f(l, e) for each l of ls, in order. A call that does not
// return, a panic or a runtime.Goexit, which a deferred function can tell
// apart from a return but not stop (a recover would hide the panic, and
// nothing stops an exit), leaves the listeners after it to the deferred
// function, which calls them; then the panic or the exit goes on, once
// they have all been called. If several fail, one exit among them ends the
// goroutine; otherwise the last panic is the one that goes on.
func Call[L, E any](ls []L, f func(L, E), e E) {
	for i := range ls {
		one(ls, i, f, e)
	}
}

// one calls f for ls[i], and, if that call does not return, for the
// listeners after it.
func one[L, E any](ls []L, i int, f func(L, E), e E) {
	returned := false
	defer func() {
		if !returned {
			Call(ls[i+1:], f, e)
		}
	}()
	f(ls[i], e)
	returned = true
}
