//go:build linux

package gateway_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// blackhole returns the address of a loopback port that takes no more
// connections and answers nothing: its accept queue is full, so a dial's
// SYN is dropped and the dial waits, as for a host that is down behind a
// firewall. It skips the test where the system does not behave so.
func blackhole(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Skip(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Skip(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Skip(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	// Fill the accept queue; then a dial must hang.
	for range 4 {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return addr
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Skip("the system accepts connections past a full accept queue")
	return ""
}

// /readyz is ready while any backend accepts a TCP connection: a first
// backend whose dials hang does not keep the probe from reaching the
// others.
func TestReadyWithFirstBackendBlackholed(t *testing.T) {
	hole := blackhole(t)
	good := backend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	gw := start(t, good.URL, "backends: [http://"+hole+", %s]\n")
	code, body := get(t, client(t), gw.admin+"/readyz")
	if code != 200 {
		t.Errorf("/readyz with the second backend up: %d %q, want 200", code, body)
	}
}
