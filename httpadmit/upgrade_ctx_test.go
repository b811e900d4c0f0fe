package httpadmit_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/policy"
)

// A 101 response's connection outlives its request's context, as in
// net/http: the slot stays held until the connection is closed, not until
// that context ends.
func TestTransportUpgradeOutlivesRequestContext(t *testing.T) {
	ev := newEvents()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)}, ev.listener())
	srv := echoUpgradeServer(t)
	client := &http.Client{Transport: httpadmit.Transport(ex, srv.Client().Transport)}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d", resp.StatusCode)
	}
	conn := resp.Body.(io.ReadWriteCloser)
	defer conn.Close()
	cancel() // the handshake's context ends; the connection lives on
	r := bufio.NewReader(conn)
	io.WriteString(conn, "hello\n")
	if line, err := r.ReadString('\n'); line != "HELLO\n" {
		t.Fatalf("echo after the context ended: %q, %v", line, err)
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
