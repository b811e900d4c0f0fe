package gateway_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// net/http answers some requests itself, in plain text, before the gateway
// sees them: none reaches a backend, and docs/gateway.md lists each (its
// section "Answers net/http gives itself"), so that the list stays true.
func TestNetHTTPOwnAnswers(t *testing.T) {
	var reached atomic.Int64
	be := backend(t, func(w http.ResponseWriter, r *http.Request) { reached.Add(1) })
	gw := start(t, be.URL, minimal+"max_header_bytes: 1024\n")
	p := newPKI(t)
	tgw := start(t, be.URL, minimal+fmt.Sprintf("tls: {cert_file: %s, key_file: %s}\n", p.certFile, p.keyFile))
	documented := ownAnswersDocumented(t)
	for _, tc := range []struct {
		to   *running
		req  string
		code int
		body string // how the body starts
	}{
		{gw, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", 8<<10) + "\r\n\r\n", 431, "431 Request Header Fields Too Large"},
		{gw, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501, "Unsupported transfer encoding"},
		{gw, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n\r\n", 501, "Unsupported transfer encoding"},
		{gw, "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505, "505 HTTP Version Not Supported: unsupported protocol version"},
		{gw, "GET / HTTP/0.9\r\nHost: x\r\n\r\n", 505, "505 HTTP Version Not Supported: unsupported protocol version"},
		{gw, "GET / HTTP/1.1\r\nX-Tenant: a\r\n\r\n", 400, "400 Bad Request: missing required Host header"},
		{gw, "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400, "400 Bad Request: malformed Host header"},
		{gw, "GET / HTTP/1.1\r\nHost: x\r\nX Tenant: a\r\n\r\n", 400, "400 Bad Request"},
		{gw, "GET / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\x00b\r\n\r\n", 400, "400 Bad Request"},
		{gw, "GET /\r\n\r\n", 400, "400 Bad Request"},
		{gw, "GET / HTTP/1.x\r\nHost: x\r\n\r\n", 400, "400 Bad Request"},
		{gw, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400, "400 Bad Request"},
		{gw, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400, "400 Bad Request"},
		{gw, "GET / HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\n\r\n", 417, ""},
		{tgw, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 400, "Client sent an HTTP request to an HTTPS server."},
	} {
		c := dialRaw(t, tc.to.url)
		c.SetDeadline(time.Now().Add(bound))
		io.WriteString(c, tc.req)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Errorf("%q: no answer: %v", tc.req, err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != tc.code || !bytes.HasPrefix(body, []byte(tc.body)) || !resp.Close {
			t.Errorf("%q: %d %q, close %v; want %d %q closing the connection", tc.req, resp.StatusCode, body, resp.Close, tc.code, tc.body)
		}
		if !documented[tc.code] {
			t.Errorf("%q: net/http answers %d itself, which docs/gateway.md does not list", tc.req, tc.code)
		}
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("%d requests reached the backend", n)
	}
}

// ownAnswersDocumented returns the statuses docs/gateway.md lists as
// net/http's own answers: the rows of the table in its section "Answers
// net/http gives itself".
func ownAnswersDocumented(t *testing.T) map[int]bool {
	t.Helper()
	doc, err := os.ReadFile("../docs/gateway.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(doc), "\n### Answers net/http gives itself\n")
	if !ok {
		t.Fatal("docs/gateway.md has no section \"Answers net/http gives itself\"")
	}
	sec, _, _ = strings.Cut(sec, "\n#")
	codes := make(map[int]bool)
	for line := range strings.Lines(sec) {
		var code int
		if _, err := fmt.Sscanf(line, "| %d ", &code); err == nil {
			codes[code] = true
		}
	}
	return codes
}
