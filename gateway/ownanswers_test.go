package gateway_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
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
// net/http's own answers: the rows of the first table in its section
// "Answers net/http gives itself".
func ownAnswersDocumented(t *testing.T) map[int]bool {
	t.Helper()
	codes := make(map[int]bool)
	for _, row := range ownAnswersTable(t, "| Status |") {
		if code, err := strconv.Atoi(row); err == nil {
			codes[code] = true
		}
	}
	return codes
}

// ownAnswersTable returns the first cells of the rows of the table whose
// header starts with head in the section "Answers net/http gives itself"
// of docs/gateway.md.
func ownAnswersTable(t *testing.T, head string) []string {
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
	_, table, ok := strings.Cut(sec, "\n"+head)
	if !ok {
		t.Fatalf("docs/gateway.md's section \"Answers net/http gives itself\" has no table %q", head)
	}
	var rows []string
	for i, line := range strings.Split(table, "\n")[1:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if cell, _, ok := strings.Cut(line[1:], "|"); ok && i > 0 { // past the |---| line
			rows = append(rows, strings.TrimSpace(cell))
		}
	}
	return rows
}

// Over HTTP/2 net/http answers otherwise than over HTTP/1: a stream is
// answered or reset (or, for one field over the header limit, the
// connection closed), a connection-specific header is a 400 where a
// Transfer-Encoding was a 501, and some requests it refuses over HTTP/1
// are served. docs/gateway.md lists each outcome (its table "Over
// HTTP/2"), and what a served one reaches: no Expect, and with tenant.from
// host a malformed :authority refused as a key.
func TestNetHTTPOwnAnswersHTTP2(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%q %q", r.Header.Values("Expect"), r.Header.Values("X-Tenant"))
	})
	p := newPKI(t)
	gw := start(t, be.URL, minimal+tlsConfig(p)+"max_header_bytes: 1024\n")
	hgw := start(t, be.URL, minimal+tlsConfig(p)+"tenant: {from: host}\n")
	documented := make(map[string]bool)
	for _, row := range ownAnswersTable(t, "| Over HTTP/2 |") {
		documented[row] = true
	}
	field := func(kv ...string) []hpack.HeaderField {
		var hf []hpack.HeaderField
		for i := 0; i+1 < len(kv); i += 2 {
			hf = append(hf, hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
		}
		return hf
	}
	b := strings.Repeat("b", 500)
	for _, tc := range []struct {
		to     *running
		fields []hpack.HeaderField // after :method, :scheme, :path; an :authority here replaces 127.0.0.1
		want   string              // the outcome: a status, RST_STREAM, GOAWAY, or served
		body   string              // how the answer's body starts
	}{
		{gw, field("x-b1", b, "x-b2", b, "x-b3", b, "x-b4", b), "431", "<h1>HTTP Error 431</h1>"},
		{gw, field("x-big", strings.Repeat("b", 2000)), "GOAWAY", ""},
		{gw, field("transfer-encoding", "gzip, chunked"), "400", `request header "Transfer-Encoding" is not valid in HTTP/2`},
		{gw, field("transfer-encoding", "chunked"), "400", `request header "Transfer-Encoding" is not valid in HTTP/2`},
		{gw, field("connection", "close"), "400", `request header "Connection" is not valid in HTTP/2`},
		{gw, field("upgrade", "h2c"), "400", `request header "Upgrade" is not valid in HTTP/2`},
		{gw, field("te", "gzip"), "400", `request header "TE" may only be "trailers" in HTTP/2`},
		{gw, field("x tenant", "a"), "RST_STREAM", ""},
		{gw, field("x-other", "a\x00b"), "RST_STREAM", ""},
		{gw, field("expect", "200-ok"), "served", `[] ["acme"]`},
		{gw, field("content-length", "1", "content-length", "2"), "served", `[] ["acme"]`},
		{gw, field("content-length", "-1"), "served", `[] ["acme"]`},
		{gw, field(":authority", ""), "served", `[] ["acme"]`},
		{gw, field(":authority", "a b"), "served", `[] ["acme"]`},
		{hgw, field(":authority", ""), "served", `[] ["anonymous"]`},
		{hgw, field(":authority", "a b"), "served", `{"error":"invalid_tenant"`},
	} {
		got, body := h2Outcome(t, tc.to.url, p, tc.fields)
		if got != tc.want || !strings.HasPrefix(body, tc.body) {
			t.Errorf("%q: %s %q; want %s %q", tc.fields, got, body, tc.want, tc.body)
		}
		if !documented[tc.want] {
			t.Errorf("%q: over HTTP/2, %s, which docs/gateway.md does not list", tc.fields, tc.want)
		}
	}
}

// h2Outcome sends a GET of fields (after its pseudo-headers; a :method or
// an :authority there replaces GET or 127.0.0.1) on a new
// HTTP/2 connection to the gateway at url, and returns what came of it:
// the answer's status and body ("served" and its body for the gateway's
// 200, or a 400 in its JSON), RST_STREAM or GOAWAY.
func h2Outcome(t *testing.T, url string, p *pki, fields []hpack.HeaderField) (string, string) {
	t.Helper()
	f, _ := dialFramer(t, url, p)
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	authority := hpack.HeaderField{Name: ":authority", Value: "127.0.0.1"}
	method := hpack.HeaderField{Name: ":method", Value: "GET"}
	var rest []hpack.HeaderField
	for _, hf := range fields {
		switch hf.Name {
		case ":authority":
			authority = hf
		case ":method":
			method = hf
		default:
			rest = append(rest, hf)
		}
	}
	hfs := []hpack.HeaderField{method, {Name: ":scheme", Value: "https"}, {Name: ":path", Value: "/"}}
	if authority.Value != "" {
		hfs = append(hfs, authority)
	}
	hfs = append(hfs, hpack.HeaderField{Name: "x-tenant", Value: "acme"})
	for _, hf := range append(hfs, rest...) {
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
			t.Fatalf("%q: %v", fields, err)
		}
		switch fr := fr.(type) {
		case *http2.GoAwayFrame:
			return "GOAWAY", ""
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
			if !fr.StreamEnded() {
				continue
			}
		case *http2.DataFrame:
			body += string(fr.Data())
			if !fr.StreamEnded() {
				continue
			}
		default:
			continue
		}
		if status == "200" || strings.HasPrefix(body, "{") {
			return "served", body
		}
		return status, body
	}
}
