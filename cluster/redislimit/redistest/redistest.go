// Package redistest starts real redis-server processes for tests and
// benchmarks: on loopback, on a free port, with persistence off, under the
// test's control (Stop, Start again on the same port, Pause, Resume). It is
// importable (not internal) so that the benchmarks module can use it too.
//
// It never mocks Redis and never skips: if redis-server is not on PATH, the
// test fails with a message saying how to install it.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// EnvAddr names the environment variable that points shared tests at a
// running Redis (host:port) instead of one they start: see Shared.
const EnvAddr = "GROUPEXEC_REDIS_ADDR"

// InstallHint says how to get redis-server; failures quote it.
const InstallHint = "redis-server is not on PATH: install it (Debian/Ubuntu: apt-get install -y redis-server; " +
	"macOS: brew install redis), or run .ci/test (it installs redis-server, then runs go test -race ./...)"

// Server is a redis-server process started by Start. Its methods are safe
// for concurrent use.
type Server struct {
	addr string
	port int

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	paused bool
}

// Start starts a redis-server on 127.0.0.1 at a free port and waits until it
// answers PING. The server is killed when tb's test ends. It fails tb if
// redis-server is not installed or does not come up.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s, err := StartServer()
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(func() { s.Stop() })
	return s
}

// StartServer is Start without a testing.TB: the caller must Stop it.
func StartServer() (*Server, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, errors.New(InstallHint)
	}
	var last error
	for range 5 { // a free port found now may be taken before redis binds it
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s := &Server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), port: port}
		if last = s.Start(); last == nil {
			return s, nil
		}
	}
	return nil, last
}

// Shared returns the address of the Redis named by GROUPEXEC_REDIS_ADDR, if
// set, or else of a server started for tb. Tests that never stop, restart or
// pause Redis may use it.
func Shared(tb testing.TB) string {
	tb.Helper()
	if a := os.Getenv(EnvAddr); a != "" {
		return a
	}
	return Start(tb).Addr()
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return s.addr }

// Start starts the server again on its port after Stop (Start is also how
// StartServer starts it). It waits until the server answers PING.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("redistest: server already running")
	}
	cmd := exec.Command("redis-server",
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "yes",
		"--loglevel", "warning", "--daemonize", "no")
	out := &lockedWriter{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a ^C to the test does not reach it first
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redistest: start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(10 * time.Second) // a hang guard on a loaded machine
	for {
		// Whose answer: another process may hold the port (see answeredBy).
		if pid, err := answeredBy(s.addr); err == nil && pid == cmd.Process.Pid {
			s.cmd, s.exited, s.paused = cmd, exited, false
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("redistest: redis-server on port %d exited: %s", s.port, out.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("redistest: redis-server on port %d did not answer PING within 10s: %s", s.port, out.String())
		}
	}
}

// Stop kills the server (SIGKILL: every key is lost, as in a crash) and
// waits for it to exit. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd, s.exited = nil, nil
}

// Restart is Stop then Start on the same port: clients reconnect to the same
// address and find an empty server.
func (s *Server) Restart() error {
	s.Stop()
	return s.Start()
}

// Pause stops the server with SIGSTOP: connections stay open but nothing is
// answered, as behind a network partition. Resume undoes it.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP, true) }

// Resume continues a paused server.
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT, false) }

func (s *Server) signal(sig syscall.Signal, paused bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return errors.New("redistest: server not running")
	}
	s.paused = paused
	return s.cmd.Process.Signal(sig)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redistest: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Ping reports whether a Redis at addr answers PING within a second. It
// speaks just enough RESP for that, so it needs no client.
func Ping(addr string) error { return ping(addr) }

func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("unexpected answer %q", line)
	}
	return nil
}

// answeredBy returns the process id of the Redis that answers at addr.
// A PING answer alone does not say whose it is: the port freePort found is
// free only until it is closed, and between Stop and Start a stopped
// server's port is free too, so another process (the redis-server of a test
// run at the same time) may take it before redis-server binds it; that one
// then answers while this one exits with "Address already in use".
func answeredBy(addr string) (int, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("INFO server\r\n")); err != nil {
		return 0, err
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n') // a bulk string: $<length>
	if err != nil {
		return 0, err
	}
	if !strings.HasPrefix(head, "$") {
		return 0, fmt.Errorf("unexpected answer to INFO: %q", head)
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return 0, fmt.Errorf("no process_id in the answer to INFO: %w", err)
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
}

// lockedWriter keeps the first few KiB of the server's output, for errors.
type lockedWriter struct {
	mu sync.Mutex
	w  strings.Builder
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w.Len() > 4096 {
		return len(p), nil
	}
	return l.w.Write(p)
}
