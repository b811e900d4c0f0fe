package httpadmit_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/policy"
)

// A client that goes away in the middle of a long streamed response: next,
// which sees it as a failed write or flush or its context's end, gives the
// response up with http.ErrAbortHandler, as httputil.ReverseProxy does.
// The request counts as Cancelled, never as a failure of the group, and
// its slot is freed. A next that just returns is no failure either.
func TestHandlerClientGoneMidBodyIsNotAFailure(t *testing.T) {
	for _, wk := range writerKinds {
		for _, tc := range []struct {
			name    string
			giveUp  func()
			outcome executor.Status // 0: anything but Failed
		}{
			{"next aborts", func() { panic(http.ErrAbortHandler) }, executor.Cancelled},
			{"next returns", func() {}, 0},
		} {
			t.Run(wk.name+" "+tc.name, func(t *testing.T) {
				ev := newEvents()
				ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)}, ev.listener())
				gaveUp := make(chan error, 1)
				srv := serve(t, httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path != "/stream" {
						return
					}
					rc := http.NewResponseController(w)
					chunk := bytes.Repeat([]byte("x"), 32<<10)
					for {
						_, err := w.Write(chunk)
						if err == nil {
							err = rc.Flush()
						}
						if err == nil {
							err = r.Context().Err()
						}
						if err != nil {
							gaveUp <- err
							tc.giveUp()
							return
						}
					}
				}), wk.opts...))
				resp, err := srv.Client().Do(clientRequest(t, guarded(t), http.MethodGet, srv.URL+"/stream", nil))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := io.ReadFull(resp.Body, make([]byte, 1000)); err != nil {
					t.Fatalf("the first bytes: %v", err)
				}
				resp.Body.Close() // the body unread: the client closes the connection
				<-gaveUp
				e := next(t, ev.completed)
				if e.Status == executor.Failed || tc.outcome != 0 && e.Status != tc.outcome {
					t.Errorf("ended %v %v, want %v, not Failed", e.Status, e.Err, tc.outcome)
				}
				if tc.outcome == executor.Cancelled && !errors.Is(e.Err, http.ErrAbortHandler) {
					t.Errorf("outcome %v, want the abort", e.Err)
				}
				if s, _ := ex.GroupStats("a"); s.Failed != 0 || s.InFlight != 0 {
					t.Errorf("%d failed, %d in flight; want 0 and 0", s.Failed, s.InFlight)
				}
				if code, _, _ := mustGet(t, srv.URL, "a"); code != http.StatusOK {
					t.Errorf("after the client went: %d, want 200 in the freed slot", code)
				}
			})
		}
	}
}
