package gateway_test

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Over HTTP/2 net/http serves a request whose :path has a space in its
// query ("/?a b"), which it refuses over HTTP/1, where a space ends the
// request-target: the transport wrote it into the backend's request line
// as sent ("GET /?x HTTP/1.0 y HTTP/1.1"), a line each backend splits its
// own way. Such a request is refused 400 bad_target, as net/http refuses
// it over HTTP/1, and never reaches a backend; a space in the path, which
// the transport escapes, is proxied.
func TestHTTP2SpaceInQueryRefused(t *testing.T) {
	url, taken := lineBackend(t)
	p := newPKI(t)
	gw := start(t, url, minimal+tlsConfig(p))
	for _, tc := range []struct{ path, status, line string }{
		{"/?a b", "400", ""},
		{"/x?q=HTTP/1.0 y", "400", ""},
		{"/a b?c", "200", "GET /a%20b?c HTTP/1.1"},
	} {
		status, body := h2Path(t, gw.url, p, tc.path)
		got := taken()
		if status != tc.status {
			t.Errorf("%q: %s %q, want %s", tc.path, status, body, tc.status)
		}
		if tc.status == "400" && !strings.HasPrefix(body, `{"error":"bad_target"`) {
			t.Errorf("%q: %s %q, want 400 bad_target", tc.path, status, body)
		}
		wantLine(t, tc.path, got, tc.line)
	}
	if got := metric(t, gw.gw.Metrics(), "rejected_total", "reason", "target"); got != 2 {
		t.Errorf("rejected_total{reason=target} = %v, want 2", got)
	}
}

// h2Path sends a GET for path over a new HTTP/2 connection, and returns
// the answer's status and body.
func h2Path(t *testing.T, url string, p *pki, path string) (string, string) {
	t.Helper()
	f, _ := dialFramer(t, url, p)
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, hf := range []hpack.HeaderField{
		{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "https"}, {Name: ":path", Value: path},
		{Name: ":authority", Value: "127.0.0.1"}, {Name: "x-tenant", Value: "acme"},
	} {
		enc.WriteField(hf)
	}
	if err := f.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	dec := hpack.NewDecoder(4096, nil)
	status, body := "", ""
	for {
		fr, err := f.ReadFrame()
		if err != nil {
			t.Fatalf("%q: %v", path, err)
		}
		switch fr := fr.(type) {
		case *http2.RSTStreamFrame:
			return "RST_STREAM", ""
		case *http2.HeadersFrame:
			hf, err := dec.DecodeFull(fr.HeaderBlockFragment())
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range hf {
				if h.Name == ":status" {
					status = h.Value
				}
			}
			if fr.StreamEnded() {
				return status, body
			}
		case *http2.DataFrame:
			body += string(fr.Data())
			if fr.StreamEnded() {
				return status, body
			}
		}
	}
}
