package httpadmit_test

import (
	"bufio"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/policy"
)

// parkedInAdmission counts the goroutines parked in a method of a
// request's admission context: a watcher of its Cancel channel.
func parkedInAdmission() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			parked := 0
			for g := range strings.SplitSeq(string(buf[:n]), "\n\n") {
				if strings.Contains(g, "httpadmit.(*admissionCtx)") {
					parked++
				}
			}
			return parked
		}
		buf = make([]byte, 2*len(buf))
	}
}

// A body held open is let go, its slot freed, once the request's Cancel
// channel is closed, as once its context ends: net/http can no longer
// read it.
func TestTransportCancelChannelEndsTheBodysHold(t *testing.T) {
	ev := newEvents()
	ex := newExec(t, nil, ev.listener())
	rt := httpadmit.Transport(ex, roundTripper(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
	}))
	req, _ := http.NewRequest(http.MethodGet, "http://svc.test/", nil)
	cancel := make(chan struct{})
	//lint:ignore SA1019 http.Client sets it for a Transport it does not know
	req.Cancel = cancel
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	close(cancel)
	select {
	case e := <-ev.completed:
		if e.Status != executor.Success {
			t.Errorf("completed %v (%v), want Success", e.Status, e.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the slot still held 10s after the request's Cancel channel was closed")
	}
	if n := inFlight(ex, "svc.test:80"); n != 0 {
		t.Errorf("%d in flight once the Cancel channel closed, want 0", n)
	}
}

// A 101 response's connection outlives its request's Cancel channel, as it
// does the request's context: the slot stays held until the connection is
// closed.
func TestTransportUpgradeOutlivesCancelChannel(t *testing.T) {
	ev := newEvents()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)}, ev.listener())
	srv := echoUpgradeServer(t)
	client := &http.Client{Transport: httpadmit.Transport(ex, srv.Client().Transport)}
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	cancel := make(chan struct{})
	//lint:ignore SA1019 http.Client sets it for a Transport it does not know
	req.Cancel = cancel
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d", resp.StatusCode)
	}
	conn := resp.Body.(io.ReadWriteCloser)
	defer conn.Close()
	close(cancel) // the handshake is given up; the connection lives on
	r := bufio.NewReader(conn)
	io.WriteString(conn, "hello\n")
	if line, err := r.ReadString('\n'); line != "HELLO\n" {
		t.Fatalf("echo after the Cancel channel closed: %q, %v", line, err)
	}
	select {
	case e := <-ev.completed:
		t.Errorf("slot freed (%v) while the upgraded connection is open", e.Status)
	case <-time.After(100 * time.Millisecond): // nothing comes when the slot is held
	}
	if n := inFlight(ex, host(t, srv.URL)); n != 1 {
		t.Errorf("%d in flight while upgraded, want 1", n)
	}
	conn.Close()
	if n := inFlight(ex, host(t, srv.URL)); n != 0 {
		t.Errorf("%d in flight after Close", n)
	}
}

// A request that waited in its queue, its Cancel channel watched, and was
// then admitted and served with the channel never closed, leaves no
// watcher behind once done with (the package's goleak check).
func TestTransportCancelChannelWatchedInTheQueueEndsWithTheRequest(t *testing.T) {
	ev := newEvents()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithDefaultMaxInFlight(2)}, ev.listener())
	rt := httpadmit.Transport(ex, roundTripper(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
	}))
	first, _ := http.NewRequest(http.MethodGet, "http://svc.test/", nil)
	held, err := rt.RoundTrip(first)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Body.Close() })
	next(t, ev.submitted)
	req, _ := http.NewRequest(http.MethodGet, "http://svc.test/", nil)
	//lint:ignore SA1019 http.Client sets it for a Transport it does not know
	req.Cancel = make(chan struct{})
	respc := make(chan *http.Response, 1)
	go func() {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Error(err)
		}
		respc <- resp
	}()
	next(t, ev.submitted) // in line behind the first
	for deadline := time.Now().Add(10 * time.Second); parkedInAdmission() != 1; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("no goroutine watches the Cancel channel of a request waiting in its queue")
		}
	}
	held.Body.Close()
	resp := <-respc
	if resp == nil {
		return
	}
	resp.Body.Close()
	if n := inFlight(ex, "svc.test:80"); n != 0 {
		t.Errorf("%d in flight after Body.Close", n)
	}
}
