package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// SIGHUP reloads the config file in place: the process keeps serving, a
// good file's limits are in force, a bad file is refused with its errors
// in the log and the old config kept.
func TestSIGHUPReloads(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	bin := build(t, dir)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer be.Close()
	cfgPath := filepath.Join(dir, "gateway.yaml")
	write := func(extra string) {
		os.WriteFile(cfgPath, fmt.Appendf(nil, "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nbackends: [%s]\n%s", be.URL, extra), 0o600)
	}
	write("rate_limit: {rps: 1000}\n")
	p := startBinary(t, bin, cfgPath)
	c := &http.Client{Timeout: bound, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(url string) (int, string) {
		resp, err := c.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	metric := func(line string) bool {
		_, body := get(p.admin + "/metrics")
		return strings.Contains(body, line)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(bound)
		for !cond() {
			select {
			case err := <-p.exited:
				t.Fatalf("the gateway exited waiting for %s: %v\n%s", what, err, p.logs())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s\n%s", what, p.logs())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	write("rate_limit: {rps: 0.001, burst: 1}\n")
	p.cmd.Process.Signal(syscall.SIGHUP)
	waitFor("the reload", func() bool { return metric(`groupexec_config_reloads_total{result="ok"} 1`) })
	if code, _ := get(p.proxy); code != 200 {
		t.Errorf("first request after the reload: %d", code)
	}
	if code, _ := get(p.proxy); code != 429 {
		t.Errorf("second request under the reloaded rate limit: %d, want 429", code)
	}

	write("rate_limit: {rps: 0}\nlisen: x\n")
	p.cmd.Process.Signal(syscall.SIGHUP)
	waitFor("the refusal", func() bool { return metric(`groupexec_config_reloads_total{result="error"} 1`) })
	// The counter moves before the command logs the refusal, and the log
	// reaches p.logs through a pipe and a goroutine of this test: the
	// lines come, but after the counter.
	waitFor("the refusal's errors in the log", func() bool {
		logs := p.logs()
		return strings.Contains(logs, "config reload refused") && strings.Contains(logs, "line 4: rate_limit.rps") &&
			strings.Contains(logs, "line 5: lisen: unknown key")
	})
	if code, _ := get(p.proxy); code != 429 {
		t.Errorf("after the refused reload: %d, want 429 (the old config kept)", code)
	}

	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, p.logs())
		}
	case <-time.After(bound):
		t.Fatal("the gateway did not exit")
	}
}

// A SIGHUP that arrives while the gateway is starting, here while it reads
// its config file, is a reload once it serves: the signal's default action,
// which ends the process, must not apply between start and serving. The
// file is a named pipe, so the test knows the gateway is reading it: its
// open for writing returns only once the gateway has opened it to read.
// A reload reads only a regular file: the pipe is replaced by one, holding
// the same config, before the gateway is given its config through the
// pipe it holds open.
func TestSIGHUPDuringStartupReloads(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	bin := build(t, dir)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer be.Close()
	pipe := filepath.Join(dir, "gateway.yaml")
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		t.Skip("no named pipe:", err)
	}
	cfg := fmt.Appendf(nil, "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nbackends: [%s]\n", be.URL)
	p := launchBinary(t, bin, pipe)
	// feed waits for the gateway to open the pipe to read, calls then, and
	// writes the config into the pipe.
	feed := func(then func()) {
		t.Helper()
		opened := make(chan *os.File, 1)
		go func() {
			f, err := os.OpenFile(pipe, os.O_WRONLY, 0)
			if err != nil {
				t.Errorf("open the pipe to write: %v", err)
			}
			opened <- f
		}()
		fail := func(format string, args ...any) {
			t.Helper()
			// Open the pipe's read end, so that the open above returns.
			if r, err := os.OpenFile(pipe, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
				if f := <-opened; f != nil {
					f.Close()
				}
				r.Close()
			}
			t.Fatalf(format, args...)
		}
		select {
		case f := <-opened:
			if f == nil {
				t.FailNow()
			}
			then()
			f.Write(cfg)
			f.Close()
		case err := <-p.exited:
			fail("the gateway exited before it read its config: %v\n%s", err, p.logs())
		case <-time.After(bound):
			fail("the gateway did not read its config\n%s", p.logs())
		}
	}
	feed(func() {
		// What the reload reads.
		regular := filepath.Join(dir, "regular.yaml")
		if err := os.WriteFile(regular, cfg, 0o600); err != nil {
			t.Error(err)
		}
		if err := os.Rename(regular, pipe); err != nil {
			t.Error(err)
		}
		p.cmd.Process.Signal(syscall.SIGHUP)
	})
	p.waitServing(t)
	c := &http.Client{Timeout: bound, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(bound)
	for {
		resp, err := c.Get(p.admin + "/metrics")
		if err != nil {
			t.Fatalf("GET /metrics: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), `groupexec_config_reloads_total{result="ok"} 1`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the SIGHUP sent during startup did not reload the config\n%s", p.logs())
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, p.logs())
		}
	case <-time.After(bound):
		t.Fatal("the gateway did not exit")
	}
}

// SIGHUP reloads during a drain too, as POST /reload does: a reload during
// drain_delay sets the drain_timeout that follows it.
func TestSIGHUPReloadsDuringTheDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	bin := build(t, dir)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer be.Close()
	cfgPath := filepath.Join(dir, "gateway.yaml")
	write := func(extra string) {
		os.WriteFile(cfgPath, fmt.Appendf(nil, "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nbackends: [%s]\ndrain_delay: 1h\n%s", be.URL, extra), 0o600)
	}
	write("")
	p := startBinary(t, bin, cfgPath)
	c := &http.Client{Timeout: bound, Transport: &http.Transport{DisableKeepAlives: true}}
	// poll waits until the admin address answers path with a body holding want.
	poll := func(what, path string, status int, want string) {
		t.Helper()
		deadline := time.Now().Add(bound)
		for {
			resp, err := c.Get(p.admin + path)
			if err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == status && strings.Contains(string(body), want) {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s\n%s", what, p.logs())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	poll("the drain", "/readyz", http.StatusServiceUnavailable, "")
	draining := time.Now() // the first SIGTERM was handled before
	write("drain_timeout: 1s\n")
	p.cmd.Process.Signal(syscall.SIGHUP)
	poll("the reload during the drain", "/metrics", http.StatusOK, `groupexec_config_reloads_total{result="ok"} 1`)
	// The second, sameStop after the first (sooner, it would be taken for
	// the first sent twice): stop without waiting out drain_delay.
	time.Sleep(time.Until(draining.Add(sameStop)))
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(bound):
		t.Fatal("the gateway did not exit")
	}
}
