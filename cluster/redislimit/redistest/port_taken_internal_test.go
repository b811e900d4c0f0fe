package redistest

import (
	"strings"
	"testing"
)

// Start on a port another redis-server holds fails: the server it started
// cannot bind the port and exits, and the other's PING answer is not taken
// for its own. The port freePort finds is free only until it is closed, so
// another process (a test of another package, run at the same time, that
// starts a redis-server of its own) can take it before this one binds it;
// so can a Restart's port, between Stop and Start. Start then returned nil
// with a server that was exiting, and the test went on against the other
// one's keys, or against nothing once that one stopped.
func TestStartOnAPortAnotherServerHoldsFails(t *testing.T) {
	other := Start(t)
	s := &Server{addr: other.addr, port: other.port}
	t.Cleanup(s.Stop)
	err := s.Start()
	if err == nil {
		t.Fatalf("Start on %s, held by another redis-server: nil; want it to fail", s.addr)
	}
	if !strings.Contains(err.Error(), "exited") {
		t.Errorf("Start on a held port: %v; want it to say that its redis-server exited", err)
	}
	if err := Ping(other.Addr()); err != nil {
		t.Errorf("the other server: %v", err)
	}
}
