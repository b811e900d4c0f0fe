package groupsem_test

import (
	"math"
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

func TestUnlimited(t *testing.T) {
	s := groupsem.New(math.MaxInt)
	s.Acquire(1 << 40)
	if !s.Fits(1 << 40) {
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
