package groupsem_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/internal/groupsem"
)

func TestSem(t *testing.T) {
	s := groupsem.New(4)
	if !s.Fits(4) || s.Fits(5) {
		t.Fatal("Fits on an empty sem")
	}
	s.Acquire(3)
	if s.Fits(2) || !s.Fits(1) || s.Used() != 3 || s.Available() != 1 || s.Limit() != 4 {
		t.Fatalf("after Acquire(3): used %d available %d", s.Used(), s.Available())
	}
	s.SetLimit(2) // lowered below use: nothing fits, nothing is lost
	if s.Fits(1) || s.Available() != 0 || s.Used() != 3 {
		t.Fatalf("after SetLimit(2): used %d available %d", s.Used(), s.Available())
	}
	s.Release(2)
	if !s.Fits(1) || s.Fits(2) {
		t.Fatal("after Release(2)")
	}
}

func TestTryAcquire(t *testing.T) {
	s := groupsem.New(3)
	if !s.TryAcquire(2) || s.TryAcquire(2) || s.Used() != 2 || !s.TryAcquire(1) || s.TryAcquire(1) {
		t.Fatalf("TryAcquire against limit 3: used %d", s.Used())
	}
}

func TestUnlimited(t *testing.T) {
	s := groupsem.New(math.MaxInt)
	s.Acquire(math.MaxInt / 2)
	if !s.Fits(math.MaxInt / 2) {
		t.Fatal("an unlimited sem refused")
	}
}

func TestMisusePanics(t *testing.T) {
	for name, f := range map[string]func(s *groupsem.Sem){
		"acquire beyond limit": func(s *groupsem.Sem) { s.Acquire(2) },
		"release not held":     func(s *groupsem.Sem) { s.Release(1) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			s := groupsem.New(1)
			f(&s)
		})
	}
}

func TestDrain(t *testing.T) {
	s := groupsem.New(4)
	s.Acquire(4)
	if started, _ := s.SetLimit(4); started || s.Draining() {
		t.Fatal("a limit equal to use is not a drain")
	}
	if started, ended := s.SetLimit(2); !started || ended || !s.Draining() {
		t.Fatalf("lowering below use: started %v ended %v draining %v", started, ended, s.Draining())
	}
	if started, _ := s.SetLimit(1); started || !s.Draining() {
		t.Fatal("lowering again while draining starts no new drain")
	}
	s.SetLimit(2)
	if s.Release(1) || !s.Draining() { // 3 in use, limit 2
		t.Fatal("drain ended with use above the limit")
	}
	if s.Release(1) || !s.Draining() { // 2 in use, limit 2: still nothing free
		t.Fatal("drain ended with use at the limit")
	}
	if !s.Release(1) || s.Draining() || !s.Fits(1) { // 1 in use: below
		t.Fatal("drain did not end once use dropped below the limit")
	}
	if s.Release(1) {
		t.Fatal("a release outside a drain reported a drain end")
	}

	s.Acquire(2)
	s.SetLimit(1)
	if _, ended := s.SetLimit(3); !ended || s.Draining() {
		t.Fatal("raising above use did not end the drain")
	}
}

// Observe is Release and Acquire by difference, for an owner that counts use
// outside its lock: a drop below a lowered limit ends the drain, once.
func TestObserve(t *testing.T) {
	s := groupsem.New(4)
	if s.Observe(3) || s.Used() != 3 || s.Draining() {
		t.Fatal("observing use under the limit")
	}
	s.SetLimit(2)
	if s.Observe(2) || !s.Draining() { // at the limit: still draining
		t.Fatal("drain ended with use at the limit")
	}
	if !s.Observe(1) || s.Draining() || !s.Fits(1) {
		t.Fatal("drain did not end once observed use dropped below the limit")
	}
	if s.Observe(0) || s.Used() != 0 {
		t.Fatal("a drop outside a drain reported a drain end")
	}
}

// Fits is the one definition of "fits": n more permits fit when they bring
// use to the limit at most, never while a lowered limit leaves use above it.
func TestFitsDefinition(t *testing.T) {
	for _, c := range []struct {
		limit, used, n int
		want           bool
	}{
		{4, 0, 4, true},
		{4, 0, 5, false},
		{4, 3, 1, true},
		{4, 3, 2, false},
		{4, 4, 1, false},
		{2, 5, 1, false}, // draining: use above the limit
	} {
		if got := groupsem.Fits(c.limit, c.used, c.n); got != c.want {
			t.Errorf("Fits(%d, %d, %d) = %v, want %v", c.limit, c.used, c.n, got, c.want)
		}
		s := groupsem.New(c.limit)
		if c.used <= c.limit {
			s.Acquire(c.used)
		} else {
			s.Acquire(c.limit)
			s.Observe(c.used) // a lock-free owner's count, above the limit
		}
		if got := s.Fits(c.n); got != c.want {
			t.Errorf("Sem{limit %d, used %d}.Fits(%d) = %v, want %v", c.limit, c.used, c.n, got, c.want)
		}
	}
}

// A negative count is a bug in the owner, never a request: taking -1
// permits would free one nobody released, giving back -1 would take one
// nobody holds, and the limit would then be exceeded or never reached. Every
// method that takes a count refuses a negative one with a panic naming the
// call and value, and changes nothing.
func TestNegativeCountsPanic(t *testing.T) {
	for _, c := range []struct {
		call string
		f    func(s *groupsem.Sem)
	}{
		{"Fits(-1)", func(s *groupsem.Sem) { s.Fits(-1) }},
		{"Fits(-1)", func(*groupsem.Sem) { groupsem.Fits(2, 1, -1) }},
		{"Acquire(-1)", func(s *groupsem.Sem) { s.Acquire(-1) }},
		{"TryAcquire(-1)", func(s *groupsem.Sem) { s.TryAcquire(-1) }},
		{"Release(-1)", func(s *groupsem.Sem) { s.Release(-1) }},
		{"Observe(-1)", func(s *groupsem.Sem) { s.Observe(-1) }},
		{"SetLimit(-1)", func(s *groupsem.Sem) { s.SetLimit(-1) }},
		{"New(-1)", func(s *groupsem.Sem) { *s = groupsem.New(-1) }},
	} {
		t.Run(c.call, func(t *testing.T) {
			s := groupsem.New(2)
			s.Acquire(1)
			func() {
				defer func() {
					if msg := fmt.Sprint(recover()); !strings.Contains(msg, c.call) {
						t.Errorf("recovered %q, want a panic naming %s", msg, c.call)
					}
				}()
				c.f(&s)
			}()
			if s.Used() != 1 || s.Limit() != 2 || s.Draining() {
				t.Errorf("after a refused %s: used %d, limit %d, draining %v", c.call, s.Used(), s.Limit(), s.Draining())
			}
		})
	}
}

// Zero is a count like any other: nothing is taken or given back.
func TestZeroCounts(t *testing.T) {
	s := groupsem.New(1)
	s.Acquire(1)
	if !s.Fits(0) || !s.TryAcquire(0) || s.Release(0) || s.Used() != 1 {
		t.Fatalf("zero counts on a full sem: used %d", s.Used())
	}
	s.Acquire(0)
	if s.Used() != 1 {
		t.Fatalf("Acquire(0) changed used to %d", s.Used())
	}
}
