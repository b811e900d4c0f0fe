package gateway_test

import (
	"bufio"
	"io"
	"testing"
	"time"
)

// Over TLS the gateway cannot count the header lines of a connection's
// bytes, as it does on a plain one: it closes a connection after every
// chunked HTTP/1 request instead. A request net/http frames by its length,
// whose Transfer-Encoding came on a folded line (which net/http joins to
// the header before it, where a front proxy may take it for a header of
// its own and go by the chunks), closes its connection over TLS too: the
// folded line is seen in the value net/http joined it to, the name at its
// start or after a blank. A request without one keeps its connection.
func TestFoldedTransferEncodingOverTLSClosesConnection(t *testing.T) {
	p := newPKI(t)
	gw := start(t, echo(t), minimal+tlsConfig(p))
	for _, tc := range []struct {
		name   string
		req    string
		closed bool
	}{
		{"chunked folded", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nX-A: a\r\n Transfer-Encoding: chunked\r\n\r\nabc", true},
		{"chunked folded after a tab, in another case", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nX-A: a\r\n\ttransfer-ENCODING: chunked\r\n\r\nabc", true},
		{"value folded", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nX-A:\r\n Transfer-Encoding: chunked\r\n\r\nabc", true},
		{"length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nX-A: a\r\n\r\nabc", false},
		{"named inside a word", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nX-A: no-transfer-encoding\r\n\r\nabc", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialTLS1(t, gw.url, p)
			c.SetDeadline(time.Now().Add(bound))
			br := bufio.NewReader(c)
			io.WriteString(c, tc.req)
			resp := readResponse(t, br)
			if resp.StatusCode != 200 || resp.Header.Get("X-Got") != "3," {
				t.Fatalf("%d, backend got %q", resp.StatusCode, resp.Header.Get("X-Got"))
			}
			if resp.Close != tc.closed {
				t.Errorf("Connection: close is %v, want %v", resp.Close, tc.closed)
			}
			if tc.closed {
				if _, err := br.ReadByte(); err != io.EOF {
					t.Errorf("the connection is still open: %v", err)
				}
			}
		})
	}
}
