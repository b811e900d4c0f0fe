package fanout_test

import (
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/groupexec/groupexec/internal/fanout"
)

// listener is a test listener: it records what it heard, then does what
// its name says ("ok", "panic" or "exit").
type listener struct{ name string }

type heard struct{ names []string }

func (h *heard) call(l *listener, e string) {
	h.names = append(h.names, l.name+":"+e)
	switch l.name {
	case "panic", "panic2":
		panic(l.name)
	case "exit":
		runtime.Goexit()
	}
}

// outcome calls ls through Call on a goroutine of its own and reports
// what they heard, and how the goroutine ended: "exited" if it did not go
// on past the call, else the value of the panic that went on, or
// "returned".
func outcome(ls []*listener) (names []string, end string) {
	var h heard
	done := make(chan string)
	go func() {
		end := "exited"
		defer func() { done <- end }()
		var panicked any
		returned := false
		func() {
			defer func() { panicked = recover() }()
			fanout.Call(ls, h.call, "e")
			returned = true
		}()
		// Not reached if a listener's exit goes on.
		if end = "returned"; !returned {
			end = fmt.Sprint(panicked)
		}
	}()
	end = <-done
	return h.names, end
}

func TestCallReachesEveryListener(t *testing.T) {
	for _, tc := range []struct {
		names []string
		end   string
	}{
		{[]string{"a", "b", "c"}, "returned"},
		{[]string{"a", "panic", "c"}, "panic"},
		{[]string{"exit", "b", "c"}, "exited"},
		{[]string{"panic", "exit", "c"}, "exited"},
		{[]string{"exit", "panic", "c"}, "exited"},
		{[]string{"panic", "b", "panic2"}, "panic2"},
		{nil, "returned"},
	} {
		var ls []*listener
		var want []string
		for _, n := range tc.names {
			ls = append(ls, &listener{n})
			want = append(want, n+":e")
		}
		got, end := outcome(ls)
		if !slices.Equal(got, want) || end != tc.end {
			t.Errorf("%v: heard %v, ended %q; want %v, %q", tc.names, got, end, want, tc.end)
		}
	}
}

func TestFlatten(t *testing.T) {
	a, b, c := &listener{"a"}, &listener{"b"}, &listener{"c"}
	lists := map[*listener][]*listener{c: {b, a}}
	inner := func(l *listener) ([]*listener, bool) { in, ok := lists[l]; return in, ok }
	got := fanout.Flatten([]*listener{nil, a, c, nil, b}, inner)
	if want := []*listener{a, b, a, b}; !slices.Equal(got, want) {
		t.Errorf("Flatten = %v, want %v", got, want)
	}
	if got := fanout.Flatten([]*listener{nil}, inner); len(got) != 0 {
		t.Errorf("Flatten of nil = %v, want none", got)
	}
}

func TestOf(t *testing.T) {
	a, b := &listener{"a"}, &listener{"b"}
	inner := func(*listener) ([]*listener, bool) { return nil, false }
	wrap := func(all []*listener) *listener { return &listener{fmt.Sprint(len(all))} }
	if got := fanout.Of([]*listener{nil}, inner, wrap); got != nil {
		t.Errorf("Of none = %v, want nil", got)
	}
	if got := fanout.Of([]*listener{nil, a}, inner, wrap); got != a {
		t.Errorf("Of one = %v, want it", got)
	}
	if got := fanout.Of([]*listener{a, nil, b}, inner, wrap); got == nil || got.name != "2" {
		t.Errorf("Of two = %v, want their list", got)
	}
}

// Of's list is its own: the caller's slice (Listeners' variadic
// arguments, which may be the caller's own slice) can change afterwards
// without changing whom the list calls.
func TestOfCopiesTheListeners(t *testing.T) {
	a, b, c := &listener{"a"}, &listener{"b"}, &listener{"c"}
	inner := func(*listener) ([]*listener, bool) { return nil, false }
	var got []*listener
	wrap := func(all []*listener) *listener { got = all; return &listener{"list"} }
	ls := []*listener{a, b}
	fanout.Of(ls, inner, wrap)
	ls[0], ls[1] = c, c
	if want := []*listener{a, b}; !slices.Equal(got, want) {
		t.Errorf("list = %v after the caller's slice changed, want %v", got, want)
	}
}
