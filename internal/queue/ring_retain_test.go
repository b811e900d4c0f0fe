package queue_test

import (
	"runtime"
	"testing"
	"weak"

	"github.com/groupexec/groupexec/internal/queue"
)

type payload struct{ _ [64]byte }

// A popped value is not kept by the ring's buffer, before or after a grow:
// the run queue holds tasks, and a ring that kept the last ones popped
// would keep their closures and results alive until the slots are reused.
func TestRingPopDropsTheValue(t *testing.T) {
	var r queue.Ring[*payload]
	var popped []weak.Pointer[payload]
	for i := range 20 { // past the first grow (8), with a wrapped head
		r.Push(new(payload))
		if i%3 == 2 {
			v, _ := r.Pop()
			popped = append(popped, weak.Make(v))
		}
	}
	for r.Len() > 0 {
		v, _ := r.Pop()
		popped = append(popped, weak.Make(v))
	}
	runtime.GC()
	for i, p := range popped {
		if p.Value() != nil {
			t.Errorf("popped value %d still reachable from the ring", i)
		}
	}
	runtime.KeepAlive(&r)
}
