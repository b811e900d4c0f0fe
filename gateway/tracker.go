package gateway

import "sync"

// tracker counts the requests in the gateway and, once closed, refuses new
// ones and tells when the last has left. A sync.WaitGroup cannot do this:
// its Add must not race with Wait, and requests arrive until the listener
// has closed.
type tracker struct {
	mu     sync.Mutex
	n      int
	closed bool
	idle   chan struct{} // closed when closed and n == 0
}

// enter admits a request unless the tracker is closed.
func (t *tracker) enter() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.n++
	return true
}

func (t *tracker) leave() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n--
	if t.closed && t.n == 0 {
		close(t.idle)
	}
}

// close refuses new requests and returns a channel closed once none is left.
// Later calls return the same channel.
func (t *tracker) close() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.closed = true
		t.idle = make(chan struct{})
		if t.n == 0 {
			close(t.idle)
		}
	}
	return t.idle
}

// draining reports whether close has been called.
func (t *tracker) draining() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// count returns how many requests are in the gateway.
func (t *tracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}
