package queue

// Ring is a growable FIFO of values in a circular buffer: pushing and popping
// allocate nothing once it has grown to its working size. The zero value is
// an empty ring. A Ring is not safe for concurrent use.
//
// The buffer's length is a power of two, so that an index wraps with a mask:
// a modulo by a length only known at run time is a division, and the
// executor's run queue pays one at every push and pop.
type Ring[T any] struct {
	buf        []T
	head, size int
}

// Len returns the number of values in r.
func (r *Ring[T]) Len() int { return r.size }

// Push appends v.
func (r *Ring[T]) Push(v T) {
	if r.size == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.size)&(len(r.buf)-1)] = v
	r.size++
}

// Pop removes and returns the first value; ok is false when r is empty.
func (r *Ring[T]) Pop() (v T, ok bool) {
	if r.size == 0 {
		return v, false
	}
	var zero T
	v, r.buf[r.head] = r.buf[r.head], zero
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.size--
	return v, true
}

func (r *Ring[T]) grow() {
	buf := make([]T, max(2*len(r.buf), 8)) // stays a power of two
	for i := range r.size {
		buf[i] = r.buf[(r.head+i)&(len(r.buf)-1)]
	}
	r.buf, r.head = buf, 0
}
