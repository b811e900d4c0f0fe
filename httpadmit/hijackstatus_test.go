package httpadmit_test

import (
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
)

// A status next writes after hijacking its connection (http.Error on an
// upgraded session's error path) never reaches the client: net/http drops
// it, and the client saw what next wrote on the connection. It is not
// judged by WithFailureStatus, so it cannot open the group's breaker; a
// failing status written before the hijack, which net/http sends, is.
func TestHandlerStatusAfterHijackIsNotJudged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before bool // next writes its 500 before the hijack
		want   executor.Status
	}{
		{"after the hijack", false, executor.Success},
		{"before the hijack", true, executor.Failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEvents()
			ex := newExec(t, nil, ev.listener())
			srv := serve(t, httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.before {
					w.WriteHeader(http.StatusInternalServerError)
				}
				conn, _, err := http.NewResponseController(w).Hijack()
				if err != nil {
					t.Error(err)
					return
				}
				if !tc.before {
					io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
				}
				conn.Close()
				if !tc.before {
					http.Error(w, "the session failed", http.StatusInternalServerError)
				}
			}), httpadmit.WithFailureStatus(func(code int) bool { return code >= 500 })))
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
			if _, err := io.ReadAll(c); err != nil {
				t.Fatal(err)
			}
			if e := next(t, ev.completed); e.Status != tc.want {
				t.Errorf("ended %v %v, want %v", e.Status, e.Err, tc.want)
			}
		})
	}
}
