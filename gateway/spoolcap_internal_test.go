package gateway

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/groupexec/groupexec/gateway/config"
)

// A body kept in memory takes neither the caps' mutex nor a map entry: with
// the mutex held elsewhere, its writes and release still finish.
func TestSpoolInMemoryTakesNoLock(t *testing.T) {
	u := new(spoolUse)
	lim := &config.Body{BufferBytes: 1 << 10, SpoolMaxBytes: 1 << 20, SpoolMaxBytesPerClient: 1 << 17}
	client, _ := clientPrefix(netip.MustParseAddr("192.0.2.1"))
	u.mu.Lock()
	locked := true
	defer func() {
		if locked {
			u.mu.Unlock() // lets a write that waits for it end with the test
		}
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		sp := spool{use: u, lim: lim, threshold: lim.BufferBytes, client: client, counted: true}
		sp.Write([]byte(strings.Repeat("x", 1000)))
		sp.release()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a body kept in memory waits for the spool caps' mutex")
	}
	u.mu.Unlock()
	locked = false
	if u.clients != nil || u.total.Load() != 0 {
		t.Errorf("a body kept in memory counted: total %d, clients %v", u.total.Load(), u.clients)
	}
}

// The bytes a spool counts are given back once, by its first release; a
// write the caps refuse counts nothing, in the total or in its client's
// share, and creates no file.
func TestSpoolReleaseGivesBackOnce(t *testing.T) {
	u := new(spoolUse)
	lim := &config.Body{SpoolMaxBytes: 1000, SpoolMaxBytesPerClient: 150}
	a, _ := clientPrefix(netip.MustParseAddr("2001:db8::1"))
	b, _ := clientPrefix(netip.MustParseAddr("2001:db8::2")) // a's /64: the same client
	if a != b {
		t.Fatalf("two addresses of one /64 are two clients: %v, %v", a, b)
	}
	dir := t.TempDir()
	first := spool{use: u, lim: lim, dir: dir, client: a, counted: true}
	if _, err := first.Write(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	second := spool{use: u, lim: lim, dir: dir, client: b, counted: true}
	if _, err := second.Write(make([]byte, 100)); err != errClientSpoolFull {
		t.Fatalf("a write over the client's share: %v, want errClientSpoolFull", err)
	}
	if second.file != nil {
		t.Error("a refused write created a file")
	}
	proxy := spool{use: u, lim: lim, dir: dir} // not counted against a client
	if _, err := proxy.Write(make([]byte, 900)); err != nil {
		t.Fatal(err)
	}
	if _, err := proxy.Write(make([]byte, 1)); err != errSpoolFull {
		t.Fatalf("a write over the total: %v, want errSpoolFull", err)
	}
	if got := u.total.Load(); got != 1000 || u.clients[a] != 100 || len(u.clients) != 1 {
		t.Fatalf("total %d, clients %v; want 1000, %v: 100", got, u.clients, a)
	}
	for _, sp := range []*spool{&first, &second, &proxy, &first, &proxy} {
		sp.release()
	}
	if got := u.total.Load(); got != 0 || len(u.clients) != 0 {
		t.Errorf("after release: total %d, clients %v; want 0 and none", got, u.clients)
	}
}
