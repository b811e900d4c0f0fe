package httpadmit_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/groupexec/groupexec/httpadmit"
)

// A HEAD request is admitted as the GET of the same handler is, in the
// tenant's group, and judged the same: its client gets the status and the
// headers, Content-Length included, without the body.
func TestHandlerHeadIsAdmittedAndJudgedAsGet(t *testing.T) {
	for _, wk := range writerKinds {
		for _, code := range []int{http.StatusOK, http.StatusServiceUnavailable} {
			t.Run(wk.name+" "+http.StatusText(code), func(t *testing.T) {
				ev := newEvents()
				ex := newExec(t, nil, ev.listener())
				srv := serve(t, httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("X-Answer", "42")
					w.WriteHeader(code)
					io.WriteString(w, "the body\n")
				}), wk.opts...))
				type answer struct {
					code           int
					xAnswer, clen  string
					body           string
					group, outcome string
				}
				send := func(method string) answer {
					resp, err := srv.Client().Do(clientRequest(t, guarded(t), method, srv.URL, nil))
					if err != nil {
						t.Fatalf("%s: %v", method, err)
					}
					defer resp.Body.Close()
					b, err := io.ReadAll(resp.Body)
					if err != nil {
						t.Fatalf("%s: %v", method, err)
					}
					started, done := next(t, ev.started), next(t, ev.completed)
					return answer{resp.StatusCode, resp.Header.Get("X-Answer"), resp.Header.Get("Content-Length"),
						string(b), started.Group, done.Status.String()}
				}
				get, head := send(http.MethodGet), send(http.MethodHead)
				if get.body != "the body\n" || head.body != "" {
					t.Errorf("bodies: GET %q, HEAD %q; want next's and none", get.body, head.body)
				}
				get.body = ""
				if head != get || get.code != code || get.xAnswer != "42" || get.clen != "9" || get.group != "a" {
					t.Errorf("HEAD %+v, GET %+v; want the same, with %d, next's header and length, in group a", head, get, code)
				}
			})
		}
	}
}
