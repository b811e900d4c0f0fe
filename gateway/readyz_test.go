//go:build linux

package gateway_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
	// Fill the accept queue, as the kernel counts it (a listening socket's
	// TCP_INFO gives its length and its cap): a dial that times out says
	// nothing by itself, since a stalled test's dial times out too.
	queue := func() (n, most uint32) {
		info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			t.Skip(err)
		}
		return info.Unacked, info.Sacked
	}
	for range 4 {
		n, most := queue()
		if n > most {
			break
		}
		c, err := net.DialTimeout("tcp", addr, bound)
		if err != nil {
			t.Skip(err)
		}
		t.Cleanup(func() { c.Close() })
		// The connection joins the queue when its handshake ends there.
		for deadline := time.Now().Add(bound); ; time.Sleep(time.Millisecond) {
			if now, _ := queue(); now > n {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("a connection made did not join the accept queue")
			}
		}
	}
	if n, most := queue(); n <= most {
		t.Skip("the accept queue does not fill")
	}
	// Then a dial must hang.
	if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
		c.Close()
		t.Skip("the system accepts connections past a full accept queue")
	}
	return addr
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

// goroutinesIn returns the stacks of the goroutines running a function
// whose name contains one of fns.
func goroutinesIn(fns ...string) []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var found []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		// Not the line naming the function that started it: a goroutine
		// whose own frames are all gone is ending.
		frames, _, _ := strings.Cut(g, "\ncreated by ")
		for _, fn := range fns {
			if strings.Contains(frames, fn) {
				found = append(found, g)
				break
			}
		}
	}
	return found
}

// The readiness probe and the admin handlers, by their functions' names.
const (
	probeFn   = "gateway.(*health).backendUp"
	dialFns   = probeFn + ".func" // the probe's dials, each a goroutine of its own
	healthFns = "gateway.(*health)."
	adminFns  = "gateway.(*Gateway).AdminHandler."
)

// A readiness probe running when the gateway stops (a backend whose dials
// hang, so that the probe takes its whole second) ends before Serve
// returns: no probe, dial or admin handler is left running after, and the
// client that asked is answered or its connection closed.
func TestServeLeavesNoReadinessProbe(t *testing.T) {
	gw := start(t, "http://"+blackhole(t), minimal)
	answered := make(chan error, 1)
	go func() {
		resp, err := client(t).Get(gw.admin + "/readyz")
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	probing(t)
	if err := gw.stop(); err != nil {
		t.Fatal(err)
	}
	if left := goroutinesIn(healthFns, adminFns); len(left) > 0 {
		t.Errorf("Serve returned with %d admin handlers or probes running, the first:\n%s", len(left), left[0])
	}
	select {
	case <-answered:
	case <-time.After(bound):
		t.Error("the /readyz client was neither answered nor cut off")
	}
}

// probing waits until a readiness probe is running.
func probing(t *testing.T) {
	t.Helper()
	eventually(t, "the probe to start", func() bool { return len(goroutinesIn(probeFn)) > 0 })
}

// Close ends a readiness probe in progress (here one reading
// gateway_degraded, whose dial to a blackholed backend would take its
// whole second): once Close has returned, no probe or dial of the
// gateway's is left running.
func TestCloseEndsAReadinessProbe(t *testing.T) {
	gw := build(t, "http://"+blackhole(t), minimal)
	gathered := make(chan struct{})
	go func() {
		defer close(gathered)
		gw.Metrics().Gather()
	}()
	probing(t)
	gw.Close()
	// Close waits for the probe to give its lock up, and the probe for its
	// dials first: none is left. The probe's own goroutine may still be
	// on its way out of backendUp, its lock given up (its deferred
	// unlock): that dials nothing, and is no probe running.
	for _, g := range goroutinesIn(dialFns) {
		t.Errorf("Close returned with a probe's dial running:\n%s", g)
	}
	<-gathered
}
