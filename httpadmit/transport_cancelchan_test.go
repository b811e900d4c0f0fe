package httpadmit_test

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
)

// http.Client cancels a request through its Cancel channel when its Timeout
// passes and its Transport is not net/http's, as an httpadmit.Transport is
// not; the context it gave the request, whose deadline is the same, ends
// on a timer of its own, which may fire a moment later. A read of the body
// that fails because the caller cancelled it so says nothing of the
// destination, as one failing because the context ended: it is no failure
// (BodyError). Here the channel is closed with the context alive, the order
// in which the Client's timer wins.
func TestTransportBodyReadCancelledThroughTheCancelChannelIsNoFailure(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		name := "HTTP/1"
		if h2 {
			name = "HTTP/2"
		}
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", "100")
				io.WriteString(w, "partial")
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			}))
			srv.EnableHTTP2 = h2
			srv.Config.ErrorLog = log.New(io.Discard, "", 0)
			srv.StartTLS()
			defer srv.Close()
			ev := newEvents()
			ex := newExec(t, nil, ev.listener())
			rt := httpadmit.Transport(ex, srv.Client().Transport)
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			cancel := make(chan struct{})
			//lint:ignore SA1019 http.Client sets it for a Transport it does not know
			req.Cancel = cancel
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(resp.Body, make([]byte, len("partial"))); err != nil {
				t.Fatal(err)
			}
			close(cancel)
			if _, err := io.ReadAll(resp.Body); err == nil {
				t.Error("the body read to its end")
			}
			resp.Body.Close()
			if e := next(t, ev.completed); e.Status != executor.Success {
				t.Errorf("%v (%v), want Success: the caller cancelled the read", e.Status, e.Err)
			}
		})
	}
}
