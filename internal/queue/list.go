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

// Next returns the node after n, or nil.
func (n *Node[T]) Next() *Node[T] { return n.next }

// List is a FIFO of nodes. The zero value is an empty list.
type List[T any] struct {
	front, back *Node[T]
	len         int
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
	n.list, n.prev, n.next = l, l.back, nil
	if l.back != nil {
		l.back.next = n
	} else {
		l.front = n
	}
	l.back = n
	l.len++
}

// PushFront prepends n, which must not be in a list.
func (l *List[T]) PushFront(n *Node[T]) {
	if n.list != nil {
		panic("queue: PushFront of a node already in a list")
	}
	n.list, n.prev, n.next = l, nil, l.front
	if l.front != nil {
		l.front.prev = n
	} else {
		l.back = n
	}
	l.front = n
	l.len++
}

// Remove takes n out of l and reports whether it was there.
func (l *List[T]) Remove(n *Node[T]) bool {
	if n.list != l {
		return false
	}
	if n.prev != nil {
		n.prev.next = n.next
	} else {
		l.front = n.next
	}
	if n.next != nil {
		n.next.prev = n.prev
	} else {
		l.back = n.prev
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
