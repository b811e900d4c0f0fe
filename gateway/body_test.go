package gateway_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/groupexec/groupexec/gateway"
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

// A request's trailers are not proxied, to an HTTP/1 backend or an HTTP/2
// one (to which net/http's transport sends a request's trailers whatever
// its body's framing): a trailer, which a backend may merge into the
// header, can name neither the tenant nor the client's address to the
// backend, and no Trailer header announces one.
func TestRequestTrailersNotProxied(t *testing.T) {
	h := func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s tenant=%q xff=%q real=%q trailer-header=%q trailers=%q",
			b, r.Header.Values("X-Tenant"), r.Header.Values("X-Forwarded-For"), r.Header.Values("X-Real-Ip"),
			r.Header.Values("Trailer"), r.Trailer)
	}
	h1 := backend(t, h)
	h2 := httptest.NewUnstartedServer(http.HandlerFunc(h))
	h2.EnableHTTP2 = true
	h2.StartTLS()
	t.Cleanup(h2.Close)
	roots := x509.NewCertPool()
	roots.AddCert(h2.Certificate())
	for _, be := range []*httptest.Server{h1, h2} {
		gw := build(t, be.URL, minimal+"tenant: {trusted_proxies: [10.0.0.0/8]}\n")
		gateway.TrustBackends(gw, roots)
		c := dialRaw(t, serve(t, gw).url)
		c.SetDeadline(time.Now().Add(bound))
		io.WriteString(c, "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"+
			"Trailer: X-Tenant, X-Forwarded-For, X-Real-IP, X-Forwarded-Host\r\n\r\n"+
			"5\r\nhello\r\n0\r\nX-Tenant: victim\r\nX-Forwarded-For: 10.9.9.9\r\nX-Real-IP: 10.9.9.9\r\n"+
			"X-Forwarded-Host: victim.example\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		const want = `hello tenant=["anonymous"] xff=["127.0.0.1"] real=["127.0.0.1"] trailer-header=[] trailers=map[]`
		if resp.StatusCode != 200 || string(body) != want {
			t.Errorf("backend %s: %d, the backend got %s\nwant %s", be.URL, resp.StatusCode, body, want)
		}
	}
}
