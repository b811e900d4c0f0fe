package httpadmit_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
)

// With WithFailureStatus, a 103 Early Hints next writes before its answer
// reaches the client, with its headers, and is not the status judged: the
// final one is, so a 103 then a 500 is a failure and a 103 then a 200 (or a
// body) a success.
func TestHandlerEarlyHintsPassAndTheFinalStatusIsJudged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		final  int // 0: next writes a body without a status
		want   int
		status executor.Status
	}{
		{"103 then 200", http.StatusOK, http.StatusOK, executor.Success},
		{"103 then a body", 0, http.StatusOK, executor.Success},
		{"103 then 500", http.StatusInternalServerError, http.StatusInternalServerError, executor.Failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEvents()
			ex := newExec(t, nil, ev.listener())
			var judged []int
			srv := serve(t, httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Link", "</style.css>; rel=preload")
				w.WriteHeader(http.StatusEarlyHints)
				if tc.final != 0 {
					w.WriteHeader(tc.final)
				}
				io.WriteString(w, "answer")
			}), httpadmit.WithFailureStatus(func(code int) bool { judged = append(judged, code); return code >= 500 })))
			var hints []string
			trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
				if code == http.StatusEarlyHints {
					hints = append(hints, h.Get("Link"))
				}
				return nil
			}}
			req := clientRequest(t, httptrace.WithClientTrace(guarded(t), trace), http.MethodGet, srv.URL, nil)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != tc.want || string(b) != "answer" {
				t.Fatalf("the client got %d %q, %v; want %d and next's body", resp.StatusCode, b, err, tc.want)
			}
			if len(hints) != 1 || hints[0] != "</style.css>; rel=preload" {
				t.Errorf("the client got early hints %q, want one with next's Link", hints)
			}
			e := next(t, ev.completed)
			if len(judged) != 1 || judged[0] != tc.want || e.Status != tc.status {
				t.Fatalf("judged %v, ended %v %v; want [%d] and %v", judged, e.Status, e.Err, tc.want, tc.status)
			}
			var se *httpadmit.StatusError
			if tc.status == executor.Failed && (!errors.As(e.Err, &se) || se.Code != tc.want) {
				t.Errorf("outcome %v, want the StatusError of %d", e.Err, tc.want)
			}
		})
	}
}
