package gateway_test

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"io"
	"net/http"
	"strconv"
	"testing"
)

// echo is a backend that answers with the size and encoding of the body it got.
func echo(t *testing.T) string {
	return backend(t, func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		w.Header().Set("X-Got", strconv.FormatInt(n, 10)+","+r.Header.Get("Content-Encoding"))
	}).URL
}

// unsized hides a reader's length, so the request goes chunked and only
// streaming can catch it.
type unsized struct{ io.Reader }

func TestBodyCap(t *testing.T) {
	gw := start(t, echo(t), minimal+"body: {max_bytes: 1000}\n")
	c := client(t)
	for _, tc := range []struct {
		name string
		body io.Reader
		want int
	}{
		{"at the cap", bytes.NewReader(make([]byte, 1000)), 200},
		{"declared over the cap", bytes.NewReader(make([]byte, 1001)), 413},
		{"streamed at the cap", unsized{bytes.NewReader(make([]byte, 1000))}, 200},
		{"streamed over the cap", unsized{bytes.NewReader(make([]byte, 5000))}, 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := do(t, c, http.MethodPost, gw.url, "a", tc.body)
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d (%q)", resp.StatusCode, tc.want, body)
			}
			if tc.want == 413 {
				if code, _, _ := refusal(t, body); code != "body_too_large" {
					t.Errorf("body %q", body)
				}
			} else if got := resp.Header.Get("X-Got"); got != "1000," {
				t.Errorf("backend got %q", got)
			}
		})
	}
}

func gz(t *testing.T, data []byte) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(data)
	zw.Close()
	return b.Bytes()
}

func TestGzipBody(t *testing.T) {
	gw := start(t, echo(t), minimal+"body: {max_bytes: 100000, max_decoded_bytes: 50000, max_ratio: 10}\n")
	c := client(t)
	random := make([]byte, 60000) // incompressible: ratio about 1
	rand.Read(random)
	for _, tc := range []struct {
		name string
		body []byte
		want int
		got  string
	}{
		{"decoded and forwarded plain", gz(t, random[:20000]), 200, "20000,"},
		{"bomb over the ratio", gz(t, make([]byte, 40000)), 413, ""},
		{"over the decoded cap", gz(t, random), 413, ""},
		{"not gzip", []byte("plain text"), 400, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := do(t, c, http.MethodPost, gw.url, "a", unsized{bytes.NewReader(tc.body)}, "Content-Encoding", "gzip")
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d (%q)", resp.StatusCode, tc.want, body)
			}
			if tc.got != "" && resp.Header.Get("X-Got") != tc.got {
				t.Errorf("backend got %q, want %q", resp.Header.Get("X-Got"), tc.got)
			}
		})
	}
}
