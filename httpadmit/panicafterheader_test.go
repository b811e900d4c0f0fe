package httpadmit_test

import (
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/policy"
)

// A next that panics after its status and part of its body reached the
// client: the panic goes on to the server with its value (which aborts the
// response: the client's body read fails), the slot is freed, and the
// outcome is the panic's (Failed, or Cancelled for http.ErrAbortHandler),
// not the written status's, with or without WithFailureStatus.
func TestHandlerPanicAfterHeaderIsJudgedByThePanic(t *testing.T) {
	for _, wk := range writerKinds {
		for _, tc := range []struct {
			name    string
			code    int
			value   any
			outcome executor.Status
		}{
			{"200 then a panic", http.StatusOK, "boom", executor.Failed},
			{"200 then an abort", http.StatusOK, http.ErrAbortHandler, executor.Cancelled},
			{"500 then an abort", http.StatusInternalServerError, http.ErrAbortHandler, executor.Cancelled},
		} {
			t.Run(wk.name+" "+tc.name, func(t *testing.T) {
				ev := newEvents()
				ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)}, ev.listener())
				headerRead := make(chan struct{})
				h := httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path != "/panic" {
						return
					}
					w.WriteHeader(tc.code)
					io.WriteString(w, "partial")
					http.NewResponseController(w).Flush()
					select {
					case <-headerRead:
					case <-r.Context().Done():
					}
					panic(tc.value)
				}), wk.opts...)
				var recovered sync.Map
				srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					defer func() {
						if v := recover(); v != nil {
							recovered.Store(r.URL.Path, v)
							panic(v)
						}
					}()
					h.ServeHTTP(w, r)
				}))
				resp, err := srv.Client().Do(clientRequest(t, guarded(t), http.MethodGet, srv.URL+"/panic", nil))
				if err != nil {
					t.Fatal(err)
				}
				close(headerRead)
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.code || err == nil {
					t.Errorf("the client got %d %q, %v; want %d and a body cut short", resp.StatusCode, b, err, tc.code)
				}
				e := next(t, ev.completed)
				if e.Status != tc.outcome {
					t.Errorf("ended %v %v, want %v", e.Status, e.Err, tc.outcome)
				}
				if v, _ := recovered.Load("/panic"); v != tc.value {
					t.Errorf("the server saw the panic %v, want %v", v, tc.value)
				}
				if n := inFlight(ex, "a"); n != 0 {
					t.Errorf("%d in flight after the panic, want 0", n)
				}
				if code, _, _ := mustGet(t, srv.URL, "a"); code != http.StatusOK {
					t.Errorf("after the panic: %d, want 200 in the freed slot", code)
				}
			})
		}
	}
}
