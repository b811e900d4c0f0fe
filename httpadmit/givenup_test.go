package httpadmit_test

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
)

// An HTTP/2 client that resets its stream while next runs ends the
// request's context; a next that gives up on it and returns having written
// nothing answered nothing (net/http's 200 goes to no one). With
// WithFailureStatus the request counts as Cancelled, as a failing status
// written then does: it counted as a Success, so that a client resetting
// its requests closed a half-open breaker whose probe did no work. The
// slot is free once next returns. A next that answers before its client
// goes away still counts by its status.
func TestHandlerNothingWrittenAfterAResetIsCancelled(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reset bool
		want  executor.Status
	}{
		{"reset", true, executor.Cancelled},
		{"answered", false, executor.Success},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEvents()
			ex := newExec(t, nil, ev.listener())
			in, answer := make(chan struct{}), make(chan struct{})
			served := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				close(in)
				select {
				case <-r.Context().Done(): // given up on: nothing written
				case <-answer:
				}
			})
			srv := httptest.NewUnstartedServer(httpadmit.Handler(ex, served, httpadmit.WithFailureStatus(func(code int) bool { return code >= 500 })))
			srv.EnableHTTP2 = true
			srv.Config.ErrorLog = log.New(io.Discard, "", 0)
			srv.StartTLS()
			t.Cleanup(srv.Close)
			ctx, cancel := context.WithCancel(guarded(t))
			defer cancel()
			done := make(chan *http.Response, 1)
			go func() {
				resp, err := srv.Client().Do(clientRequest(t, ctx, http.MethodGet, srv.URL, nil))
				if err != nil {
					resp = nil
				}
				done <- resp
			}()
			<-in
			if tc.reset {
				cancel() // the client resets the stream
			} else {
				close(answer)
			}
			if resp := <-done; resp != nil {
				if resp.ProtoMajor != 2 {
					t.Errorf("served over %s; want HTTP/2", resp.Proto)
				}
				resp.Body.Close()
			}
			if e := next(t, ev.completed); e.Status != tc.want {
				t.Errorf("counted %v (%v); want %v", e.Status, e.Err, tc.want)
			}
			if s, _ := ex.GroupStats("a"); s.InFlight != 0 {
				t.Errorf("%d slots held once next returned", s.InFlight)
			}
		})
	}
}
