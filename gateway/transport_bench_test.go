package gateway

import (
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strings"
	"testing"
)

// answeringRT answers every try 200 with a short body, on conn as its
// GotConn says, as net/http's transport does on a pooled connection.
type answeringRT struct{ conn net.Conn }

func (a answeringRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if tr := httptrace.ContextClientTrace(req.Context()); tr != nil && tr.GotConn != nil {
		tr.GotConn(httptrace.GotConnInfo{Conn: a.conn, Reused: true})
	}
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("ok")), Request: req}, nil
}

// BenchmarkTransportTry is the transport's own cost of a try, without the
// network: with the connection each try uses tracked for reloads
// (conns.retire) and without.
func BenchmarkTransportTry(b *testing.B) {
	be, _ := url.Parse("http://10.0.0.1:8081")
	st := &state{backends: []*url.URL{be}}
	for _, tracked := range []bool{false, true} {
		name := "untracked"
		cs := &conns{}
		if tracked {
			name = "tracked"
		}
		b.Run(name, func(b *testing.B) {
			conn := &trackedConn{cs: cs, addr: "10.0.0.1:8081"}
			tr := &transport{base: answeringRT{conn: conn}, state: func() *state { return st }, retried: func() {}}
			if tracked {
				tr.conns = cs
			}
			req, _ := http.NewRequest(http.MethodGet, "http://gateway.example/path", nil)
			// httputil.ReverseProxy traces every request it sends for
			// its informational answers: a try's trace joins it.
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
				Got1xxResponse: func(int, textproto.MIMEHeader) error { return nil },
			}))
			b.ReportAllocs()
			for b.Loop() {
				resp, err := tr.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			if n := conn.users.Load(); n != 0 {
				b.Fatalf("%d holds left on the connection", n)
			}
		})
	}
}
