package queue_test

import (
	"testing"

	"github.com/groupexec/groupexec/internal/queue"
)

// BenchmarkRingPushPop is the run queue's pattern: a ring holding a few
// values, one pushed and one popped per operation.
func BenchmarkRingPushPop(b *testing.B) {
	var r queue.Ring[*int]
	v := new(int)
	for range 5 {
		r.Push(v)
	}
	for b.Loop() {
		r.Push(v)
		r.Pop()
	}
}
