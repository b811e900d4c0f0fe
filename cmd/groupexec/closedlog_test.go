package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"
)

// A gateway whose log's reader has gone (stderr a pipe whose read end is
// closed: a log shipper that died, `groupexec gateway ... 2>&1 | head`)
// goes on serving when it next logs, and drains on SIGTERM, exit status 0,
// finishing the request in flight. Go's default for a write to a broken
// pipe on fd 2 is to end the process with SIGPIPE, in the middle of
// whatever it was doing.
func TestClosedLogPipeKeepsServing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	bin := build(t, dir)
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Tenant") == "held" {
			held <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		io.WriteString(w, "ok")
	}))
	defer be.Close()
	cfgPath := filepath.Join(dir, "gateway.yaml")
	cfg := fmt.Appendf(nil, "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nbackends: [%s]\ndrain_timeout: 20s\n", be.URL)
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}

	// stderr is a pipe of the test's own, whose read end it closes once
	// the gateway serves.
	logR, logW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer logR.Close()
	cmd := exec.Command(bin, "gateway", "--config", cfgPath)
	cmd.Stderr = logW
	if err := cmd.Start(); err != nil {
		logW.Close()
		t.Fatal(err)
	}
	logW.Close() // the child holds the only write end
	// exited closes once the process has exited, with exitErr how.
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	defer func() {
		cmd.Process.Kill() // if the test failed with the process running
		<-exited
	}()
	addrs := make(chan []string, 1)
	go func() {
		re := regexp.MustCompile(`msg="gateway serving" proxy=(\S+) admin=(\S+)`)
		sc := bufio.NewScanner(logR)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addrs <- m[1:]
				return // reads no further: the log's reader goes away
			}
		}
		close(addrs)
	}()
	var proxy, admin string
	select {
	case a, ok := <-addrs:
		if !ok {
			<-exited
			t.Fatalf("the log ended before the gateway served: %v", exitErr)
		}
		proxy, admin = "http://"+a[0], "http://"+a[1]
	case <-time.After(bound):
		t.Fatal("gateway did not start")
	}
	logR.Close()

	c := &http.Client{Timeout: bound}
	// A refused reload is logged before it is answered: its answer says
	// the gateway survived writing to the broken pipe.
	if err := os.WriteFile(cfgPath, []byte("backends: []\nnot_a_key: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Post(admin+"/reload", "text/plain", nil)
	if err != nil {
		t.Fatalf("POST /reload, logged to the closed pipe: %v (%s)", err, howEnded(exited, &exitErr))
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("POST /reload of a bad file: %d, want 400", resp.StatusCode)
	}
	get := func(tenant string) (int, error) {
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
	if code, err := get("light"); err != nil || code != http.StatusOK {
		t.Fatalf("a request after the log broke: %d %v (%s)", code, err, howEnded(exited, &exitErr))
	}

	// A request in flight, then SIGTERM: the drain logs, and still
	// finishes it.
	heldCode := make(chan int, 1)
	go func() {
		code, err := get("held")
		if err != nil {
			t.Errorf("the request in flight during the drain: %v", err)
		}
		heldCode <- code
	}()
	select {
	case <-held:
	case <-exited:
		t.Fatalf("gateway exited: %v", exitErr)
	case <-time.After(bound):
		t.Fatal("the held request did not reach the backend")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(bound)
	for {
		resp, err := c.Get(admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz did not fail after SIGTERM (%s)", howEnded(exited, &exitErr))
		}
		select {
		case <-exited:
			t.Fatalf("gateway exited before the request in flight finished: %v", exitErr)
		case <-time.After(5 * time.Millisecond):
		}
	}
	close(release)
	if code := <-heldCode; code != http.StatusOK {
		t.Errorf("the request in flight during the drain got %d, want 200", code)
	}
	select {
	case <-exited:
		if exitErr != nil {
			t.Fatalf("exit after the drain: %v, want exit status 0", exitErr)
		}
	case <-time.After(bound):
		t.Fatal("gateway did not exit after the drain")
	}
}

// howEnded says how the process has ended, if it ends within a second of
// a failure that may be its end (a request refused as it died), or that it
// is still running.
func howEnded(exited <-chan struct{}, exitErr *error) string {
	select {
	case <-exited:
		return fmt.Sprintf("the gateway exited: %v", *exitErr)
	case <-time.After(time.Second):
		return "the gateway is still running"
	}
}
