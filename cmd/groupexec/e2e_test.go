package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// bound is how long any wait may take before it is a failure; nothing
// waits for it to pass.
const bound = 30 * time.Second

// TestEndToEnd builds the binary, runs it on loopback ports with a config
// file, floods one tenant, checks another is served, then sends SIGTERM
// while requests are in flight and checks they finish and the process exits 0.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	bin := build(t, dir)

	// The backend: 10ms of work, except for tenant "held", whose requests
	// wait until released.
	release := make(chan struct{})
	held := make(chan struct{}, 10)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Tenant") == "held" {
			held <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		} else {
			time.Sleep(10 * time.Millisecond) // the backend's work
		}
		io.WriteString(w, "ok")
	}))
	defer be.Close()

	cfgPath := filepath.Join(dir, "gateway.yaml")
	os.WriteFile(cfgPath, fmt.Appendf(nil, `listen: 127.0.0.1:0
admin: 127.0.0.1:0
backends: [%s]
limits: {max_concurrency_per_group: 2, max_in_flight_per_group: 4}
tenants: {light: {}, held: {}}
drain_timeout: 20s
`, be.URL), 0o600)

	p := startBinary(t, bin, cfgPath)
	proxy, admin, exited := p.proxy, p.admin, p.exited
	cmd := p.cmd
	tr := &http.Transport{MaxIdleConnsPerHost: 32}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: bound}
	send := func(tenant string) (int, error) {
		req, _ := http.NewRequest(http.MethodGet, proxy+"/", nil)
		req.Header.Set("X-Tenant", tenant)
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}

	// Flood one tenant with 16 loops.
	ctx, stopFlood := context.WithCancel(context.Background())
	var flood sync.WaitGroup
	var floodOK, flood429 atomic.Int64
	for range 16 {
		flood.Go(func() {
			for ctx.Err() == nil {
				code, err := send("flood")
				switch {
				case err != nil:
					return // the gateway has closed its listener
				case code == 200:
					floodOK.Add(1)
				case code == 429:
					flood429.Add(1)
				}
			}
		})
	}
	// The light tenant is served while the flood is refused.
	for i := range 20 {
		if code, err := send("light"); err != nil || code != 200 {
			t.Fatalf("light request %d: %d %v", i, code, err)
		}
	}
	for flood429.Load() == 0 || floodOK.Load() == 0 {
		select {
		case <-time.After(time.Millisecond):
		case <-exited:
			t.Fatal("gateway exited")
		}
	}

	// Two requests held in the backend, then SIGTERM mid-load.
	heldCodes := make(chan int, 2)
	for range 2 {
		go func() {
			code, err := send("held")
			if err != nil {
				t.Errorf("held request: %v", err)
			}
			heldCodes <- code
		}()
	}
	for range 2 {
		<-held
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Readiness fails while the held requests keep the drain going.
	deadline := time.Now().Add(bound)
	for {
		resp, err := http.Get(admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 503 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("readyz did not fail during the drain")
		}
		time.Sleep(5 * time.Millisecond)
	}
	stopFlood()
	flood.Wait()
	close(release)
	for range 2 {
		if code := <-heldCodes; code != 200 {
			t.Errorf("in-flight request during drain got %d, want 200", code)
		}
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, p.logs())
		}
	case <-time.After(bound):
		t.Fatal("gateway did not exit after the drain")
	}
	if logs := p.logs(); !strings.Contains(logs, `msg=drained`) {
		t.Errorf("no drain in the log:\n%s", logs)
	}
	t.Logf("flood: %d served, %d refused with 429", floodOK.Load(), flood429.Load())
}

// build builds the command into dir and returns the binary's path.
func build(t *testing.T, dir string) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	bin := filepath.Join(dir, "groupexec")
	if out, err := exec.Command(gobin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// process is the command running as a gateway.
type process struct {
	cmd          *exec.Cmd
	proxy, admin string // base URLs
	exited       chan error
	addrs        chan [2]string // the proxy and admin addresses, once it serves
	mu           sync.Mutex
	log          strings.Builder
}

func (p *process) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// startBinary runs bin as a gateway with the config at cfgPath, and waits
// until it serves. The process is killed at the end of the test if it is
// still running.
func startBinary(t *testing.T, bin, cfgPath string) *process {
	t.Helper()
	p := launchBinary(t, bin, cfgPath)
	p.waitServing(t)
	return p
}

// launchBinary runs bin as a gateway with the config at cfgPath, without
// waiting for it to serve (waitServing does). The process is killed at the
// end of the test if it is still running.
func launchBinary(t *testing.T, bin, cfgPath string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, "gateway", "--config", cfgPath), exited: make(chan error, 1),
		addrs: make(chan [2]string, 1)}
	stderr, _ := p.cmd.StderrPipe()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		re := regexp.MustCompile(`msg="gateway serving" proxy=(\S+) admin=(\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				p.addrs <- [2]string{m[1], m[2]}
			}
		}
		p.exited <- p.cmd.Wait()
	}()
	t.Cleanup(func() { p.cmd.Process.Kill() }) // only if the test failed before the process exited
	return p
}

// waitServing waits until p logs that it serves, and sets its URLs.
func (p *process) waitServing(t *testing.T) {
	t.Helper()
	select {
	case a := <-p.addrs:
		p.proxy, p.admin = "http://"+a[0], "http://"+a[1]
	case err := <-p.exited:
		t.Fatalf("gateway exited early: %v\n%s", err, p.logs())
	case <-time.After(bound):
		t.Fatal("gateway did not start")
	}
}
