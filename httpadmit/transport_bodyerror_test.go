package httpadmit_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
)

// A destination that sends its status and headers, then cuts the body
// short (closes the HTTP/1 connection before the Content-Length, resets
// the HTTP/2 stream), failed the request: it counts as a failure of the
// destination, with a *BodyError, and not as a Success by its 200. A body
// the caller closes before its end, and a read that fails because the
// caller's context ended, say nothing of the destination.
func TestTransportBodyCutShortIsAFailure(t *testing.T) {
	cut := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		if r.URL.Path == "/wait" {
			<-r.Context().Done()
			return
		}
		panic(http.ErrAbortHandler) // the connection closed, the stream reset
	})
	for _, h2 := range []bool{false, true} {
		for _, tc := range []struct {
			name, path string
			read       func(t *testing.T, body io.ReadCloser, cancel context.CancelFunc)
			want       executor.Status
		}{
			{"read to the cut", "/cut", func(t *testing.T, body io.ReadCloser, _ context.CancelFunc) {
				if _, err := io.ReadAll(body); err == nil {
					t.Error("the body read to its end")
				}
			}, executor.Failed},
			{"closed before the end", "/wait", func(t *testing.T, body io.ReadCloser, _ context.CancelFunc) {
				if _, err := io.ReadFull(body, make([]byte, len("partial"))); err != nil {
					t.Error(err)
				}
			}, executor.Success},
			{"cancelled by the caller", "/wait", func(t *testing.T, body io.ReadCloser, cancel context.CancelFunc) {
				if _, err := io.ReadFull(body, make([]byte, len("partial"))); err != nil {
					t.Error(err)
				}
				cancel()
				if _, err := io.ReadAll(body); err == nil {
					t.Error("the body read to its end")
				}
			}, executor.Success},
		} {
			name := "HTTP/1 " + tc.name
			if h2 {
				name = "HTTP/2 " + tc.name
			}
			t.Run(name, func(t *testing.T) {
				ev := newEvents()
				ex := newExec(t, nil, ev.listener())
				srv := httptest.NewUnstartedServer(cut)
				srv.EnableHTTP2 = h2
				srv.Config.ErrorLog = log.New(io.Discard, "", 0)
				srv.StartTLS()
				t.Cleanup(srv.Close)
				ctx, cancel := context.WithCancel(guarded(t))
				defer cancel()
				c := &http.Client{Transport: httpadmit.Transport(ex, srv.Client().Transport)}
				resp, err := c.Do(clientRequest(t, ctx, http.MethodGet, srv.URL+tc.path, nil))
				if err != nil {
					t.Fatal(err)
				}
				if (resp.ProtoMajor == 2) != h2 {
					t.Fatalf("served over %s", resp.Proto)
				}
				tc.read(t, resp.Body, cancel)
				resp.Body.Close()
				e := next(t, ev.completed)
				var be *httpadmit.BodyError
				if e.Status != tc.want || (tc.want == executor.Failed) != errors.As(e.Err, &be) {
					t.Errorf("counted %v (%v); want %v", e.Status, e.Err, tc.want)
				}
			})
		}
	}
}
