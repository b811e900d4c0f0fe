package gateway_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"testing"
)

// A request is proxied with the content codings its client accepts, and
// the answer reaches the client as the backend coded it: net/http's
// transport, left to itself, asked the backend for gzip on behalf of a
// client that named no coding, and decoded the answer, dropping its
// Content-Encoding and Content-Length but keeping its ETag, the
// gzip-coded representation's, now on other bytes, and decoding on the
// gateway's CPU what the client never asked to be coded.
func TestAnswerCodingsAreTheClients(t *testing.T) {
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	io.WriteString(zw, "hello, hello, hello")
	zw.Close()
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Accept-Encoding", r.Header.Get("Accept-Encoding"))
		if r.Header.Get("Accept-Encoding") != "" {
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("ETag", `"gz-1"`)
			w.Write(zipped.Bytes())
			return
		}
		w.Header().Set("ETag", `"id-1"`)
		io.WriteString(w, "hello, hello, hello")
	})
	gw := start(t, be.URL, minimal)
	tr := &http.Transport{DisableCompression: true} // sends what the test sets, and decodes nothing
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr, Timeout: bound}

	for _, tc := range []struct {
		name, accept, etag, encoding string
		body                         []byte
	}{
		{"no coding named", "", `"id-1"`, "", []byte("hello, hello, hello")},
		{"gzip named", "gzip", `"gz-1"`, "gzip", zipped.Bytes()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, gw.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.accept != "" {
				req.Header.Set("Accept-Encoding", tc.accept)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.Header.Get("X-Accept-Encoding"); got != tc.accept {
				t.Errorf("the backend was sent Accept-Encoding %q, want the client's %q", got, tc.accept)
			}
			if got := resp.Header.Get("ETag"); got != tc.etag {
				t.Errorf("ETag %q, want %q", got, tc.etag)
			}
			if got := resp.Header.Get("Content-Encoding"); got != tc.encoding {
				t.Errorf("Content-Encoding %q, want %q", got, tc.encoding)
			}
			if !bytes.Equal(body, tc.body) {
				t.Errorf("body %q, want %q", body, tc.body)
			}
		})
	}
}
