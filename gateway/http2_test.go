package gateway_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serverMaxStreams opens an HTTP/2 connection to addr and returns the
// SETTINGS_MAX_CONCURRENT_STREAMS the server announces (0: none announced,
// which means no limit).
func serverMaxStreams(t *testing.T, addr string, roots *x509.CertPool) uint32 {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("negotiated %q, want h2", p)
	}
	c.SetDeadline(time.Now().Add(bound))
	// The client preface, then an empty SETTINGS frame.
	if _, err := io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"); err != nil {
		t.Fatal(err)
	}
	// The server's first frame is its SETTINGS (RFC 9113 section 3.4):
	// a 9-byte header, then 6-byte settings (16-bit id, 32-bit value).
	var hdr [9]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		t.Fatal(err)
	}
	n := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
	if hdr[3] != 0x4 || hdr[4]&0x1 != 0 || n%6 != 0 {
		t.Fatalf("first frame: type %d flags %d length %d, want SETTINGS", hdr[3], hdr[4], n)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(c, payload); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += 6 {
		if binary.BigEndian.Uint16(payload[i:]) == 0x3 { // SETTINGS_MAX_CONCURRENT_STREAMS
			return binary.BigEndian.Uint32(payload[i+2:])
		}
	}
	return 0
}

// Over TLS, HTTP/2 lets a connection carry many requests at once, each
// with buffers of its own: the gateway announces http2_max_streams (its
// default without the key) as the connection's limit, so that max_conns
// times it bounds the requests in the gateway, and net/http's own
// default of 250 does not.
func TestHTTP2StreamsPerConnectionCapped(t *testing.T) {
	p := newPKI(t)
	roots := x509.NewCertPool()
	roots.AddCert(p.ca)
	be := backend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }).URL
	for _, tc := range []struct {
		key  string
		want uint32
	}{{"http2_max_streams: 3\n", 3}, {"", 100}} {
		gw := start(t, be, minimal+fmt.Sprintf("tls: {cert_file: %s, key_file: %s}\n", p.certFile, p.keyFile)+tc.key)
		if got := serverMaxStreams(t, strings.TrimPrefix(gw.url, "http://"), roots); got != tc.want {
			t.Errorf("%q: the server announces %d streams a connection, want %d", tc.key, got, tc.want)
		}
	}
}
