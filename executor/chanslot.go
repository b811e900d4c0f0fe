package executor

import (
	"sync/atomic"
	"unsafe"
)

// chanSlot is an atomic chan struct{} in one word. An atomic.Value takes two
// (an interface), and an atomic.Pointer to a channel variable takes an
// allocation more on every blocking Wait; the word saved keeps a
// Handle[struct{}] in the 144-byte size class (jobs.go). A channel value is
// a pointer to the runtime's channel, so it is stored as an unsafe.Pointer,
// which the garbage collector follows.
type chanSlot struct{ p unsafe.Pointer }

// Load returns the channel, or nil if none was stored.
func (s *chanSlot) Load() chan struct{} {
	p := atomic.LoadPointer(&s.p)
	return *(*chan struct{})(unsafe.Pointer(&p))
}

// CompareAndSwap stores c if the slot holds old, and reports whether it did.
func (s *chanSlot) CompareAndSwap(old, c chan struct{}) bool {
	return atomic.CompareAndSwapPointer(&s.p, *(*unsafe.Pointer)(unsafe.Pointer(&old)), *(*unsafe.Pointer)(unsafe.Pointer(&c)))
}
