package gateway

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// Once a write to a client has run past its deadline, a later write fails
// at once, whatever deadline it is given: TLS, closing a connection, sends
// its close alert under a deadline of 5 s of its own, which held an HTTP/2
// connection closed for a client taking nothing, and its streams'
// handlers, that much longer.
func TestWriteAfterTimeoutFailsAtOnce(t *testing.T) {
	client, server := net.Pipe() // nothing reads the client's end
	defer client.Close()
	defer server.Close()
	c := &conn{Conn: server}
	c.SetWriteDeadline(time.Now())
	if _, err := c.Write([]byte("an answer")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write past its deadline: %v, want a timeout", err)
	}
	c.SetWriteDeadline(time.Time{}) // as TLS's close alert sets one of its own
	done := make(chan error, 1)
	go func() {
		_, err := c.Write([]byte("a close alert"))
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("write after a timed out one: %v, want a timeout", err)
		}
	case <-time.After(10 * time.Second):
		server.Close() // ends the write
		<-done
		t.Fatal("a write after a timed out one waited on a client that takes nothing")
	}
}
