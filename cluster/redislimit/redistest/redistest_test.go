package redistest_test

import (
	"strings"
	"testing"

	"github.com/groupexec/groupexec/cluster/redislimit/redistest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMissingRedisServerSaysHowToInstall(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := redistest.StartServer()
	if err == nil || !strings.Contains(err.Error(), "apt-get install -y redis-server") {
		t.Fatalf("StartServer without redis-server on PATH: %v, want the install hint", err)
	}
}

func TestStopStartPause(t *testing.T) {
	s := redistest.Start(t)
	if err := redistest.Ping(s.Addr()); err != nil {
		t.Fatalf("PING a started server: %v", err)
	}
	s.Stop()
	if err := redistest.Ping(s.Addr()); err == nil {
		t.Fatal("a stopped server answered")
	}
	if err := s.Start(); err != nil {
		t.Fatalf("Start again: %v", err)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := redistest.Ping(s.Addr()); err == nil {
		t.Fatal("a paused server answered")
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if err := redistest.Ping(s.Addr()); err != nil {
		t.Fatalf("PING a restarted server: %v", err)
	}
}

func TestProxyStallAndResume(t *testing.T) {
	s := redistest.Start(t)
	p := redistest.StartProxy(t, s.Addr())
	if err := redistest.Ping(p.Addr()); err != nil {
		t.Fatalf("PING through the proxy: %v", err)
	}
	p.Stall()
	if err := redistest.Ping(p.Addr()); err == nil {
		t.Fatal("a stalled proxy answered")
	}
	p.Resume()
	if err := redistest.Ping(p.Addr()); err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}
}
