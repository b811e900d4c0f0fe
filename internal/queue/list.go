// Package queue is an intrusive doubly linked FIFO list. Its nodes live inside
// the values they link, so queueing a value allocates nothing, and a value can
// leave from the middle (a cancelled or timed-out task) in O(1).
//
// A List is not safe for concurrent use; its owner locks.
package queue

// Node links one value into at most one List at a time. Embed it in the value
// and set Value to the value itself.
type Node[T any] struct {
	next, prev *Node[T]
	list       *List[T]
	Value      T
}

// InList reports whether n is in a list.
func (n *Node[T]) InList() bool { return n.list != nil }

// Next returns the node after n in its list, or nil.
func (n *Node[T]) Next() *Node[T] {
	if n.list == nil || n.next == n.list.front {
		return nil
	}
	return n.next
}

// List is a FIFO of nodes. The zero value is an empty list.
//
// The nodes form a ring: the front's prev is the back. So Rotate, which
// moves the front to the back, is one pointer write that touches no node.
// The executor's deficit round robin rotates its ready list at the end of
// every turn, which on a thousand groups of one share is every start; it
// did that with a Remove and a PushBack, ten pointer writes into three
// nodes, each write behind a barrier while the collector marks.
type List[T any] struct {
	front *Node[T]
	len   int
}

// Len returns the number of nodes in l.
func (l *List[T]) Len() int { return l.len }

// Front returns the first node, or nil.
func (l *List[T]) Front() *Node[T] { return l.front }

// PushBack appends n, which must not be in a list.
func (l *List[T]) PushBack(n *Node[T]) {
	if n.list != nil {
		panic("queue: PushBack of a node already in a list")
	}
	n.list = l
	if f := l.front; f == nil {
		n.next, n.prev = n, n
		l.front = n
	} else {
		n.prev, n.next = f.prev, f
		f.prev.next = n
		f.prev = n
	}
	l.len++
}

// PushFront prepends n, which must not be in a list.
func (l *List[T]) PushFront(n *Node[T]) {
	if n.list != nil {
		panic("queue: PushFront of a node already in a list")
	}
	l.PushBack(n)
	l.front = n // the ring's back was just before the front
}

// Rotate moves the front node to the back.
func (l *List[T]) Rotate() {
	if l.front != nil {
		l.front = l.front.next
	}
}

// Remove takes n out of l and reports whether it was there.
func (l *List[T]) Remove(n *Node[T]) bool {
	if n.list != l {
		return false
	}
	if l.len == 1 {
		l.front = nil
	} else {
		n.prev.next = n.next
		n.next.prev = n.prev
		if l.front == n {
			l.front = n.next
		}
	}
	n.next, n.prev, n.list = nil, nil, nil
	l.len--
	return true
}

// PopFront removes and returns the first node, or nil.
func (l *List[T]) PopFront() *Node[T] {
	n := l.front
	if n != nil {
		l.Remove(n)
	}
	return n
}
