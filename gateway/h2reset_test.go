package gateway_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/groupexec/groupexec/gateway"
)

// h2conn is a bare HTTP/2 client connection: it writes the frames a test
// asks for, exactly, and acknowledges the server's settings.
type h2conn struct {
	c  *tls.Conn
	mu sync.Mutex // serialises writes
}

// HTTP/2 frame types and flags (RFC 9113 section 6).
const (
	h2Data       = 0x0
	h2Headers    = 0x1
	h2RSTStream  = 0x3
	h2Settings   = 0x4
	h2EndStream  = 0x1
	h2EndHeaders = 0x4
	h2Ack        = 0x1
	h2CodeCancel = 0x8
)

// dialH2 opens an HTTP/2 connection to the gateway at url (served over TLS
// with a certificate of p's CA) and sends the preface; it is closed at the
// end of the test.
func dialH2(t *testing.T, url string, p *pki) *h2conn {
	t.Helper()
	c := dialTLSH2(t, url, p)
	if proto := c.ConnectionState().NegotiatedProtocol; proto != "h2" {
		t.Fatalf("negotiated %q, want h2", proto)
	}
	h := &h2conn{c: c}
	io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	h.write(h2Settings, 0, 0, nil)
	go h.read()
	return h
}

// dialTLSH2 opens a TLS connection to the gateway at url, served with a
// certificate of p's CA, offering only h2; it is closed at the end of the
// test.
func dialTLSH2(t *testing.T, url string, p *pki) *tls.Conn {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(p.ca)
	c, err := tls.Dial("tcp", strings.TrimPrefix(url, "http://"), &tls.Config{RootCAs: roots, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// read reads the server's frames until the connection closes, and
// acknowledges its settings.
func (h *h2conn) read() {
	for {
		var hdr [9]byte
		if _, err := io.ReadFull(h.c, hdr[:]); err != nil {
			return
		}
		n := int64(hdr[0])<<16 | int64(hdr[1])<<8 | int64(hdr[2])
		if _, err := io.CopyN(io.Discard, h.c, n); err != nil {
			return
		}
		if hdr[3] == h2Settings && hdr[4]&h2Ack == 0 {
			h.write(h2Settings, h2Ack, 0, nil)
		}
	}
}

func (h *h2conn) write(typ, flags byte, stream uint32, payload []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var hdr [9]byte
	hdr[0], hdr[1], hdr[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	hdr[3], hdr[4] = typ, flags
	binary.BigEndian.PutUint32(hdr[5:], stream)
	h.c.Write(append(hdr[:], payload...))
}

// request opens stream id with a request for tenant: a GET ending the
// stream, or a POST whose body the test sends (data).
func (h *h2conn) request(id uint32, method, tenant string) {
	var block []byte
	field := func(name, value string) {
		// A literal header field without indexing, new name, no Huffman
		// coding (RFC 7541 section 6.2.2); the tests' strings are short.
		block = append(block, 0, byte(len(name)))
		block = append(block, name...)
		block = append(block, byte(len(value)))
		block = append(block, value...)
	}
	field(":method", method)
	field(":scheme", "https")
	field(":path", "/")
	field(":authority", "127.0.0.1")
	field("x-tenant", tenant)
	flags := byte(h2EndHeaders)
	if method == http.MethodGet {
		flags |= h2EndStream
	}
	h.write(h2Headers, flags, id, block)
}

func (h *h2conn) data(id uint32, p string, end bool) {
	var flags byte
	if end {
		flags = h2EndStream
	}
	h.write(h2Data, flags, id, []byte(p))
}

func (h *h2conn) reset(id uint32) {
	h.write(h2RSTStream, 0, id, binary.BigEndian.AppendUint32(nil, h2CodeCancel))
}

// tlsConfig is the tls key of a config serving with p's certificate.
func tlsConfig(p *pki) string {
	return fmt.Sprintf("tls: {cert_file: %s, key_file: %s}\n", p.certFile, p.keyFile)
}

// Streams the client resets hold nothing: their backend requests are
// cancelled, their slots freed for the tenant's next requests, they are
// counted as requests whose client went away (499), and the connection is
// idle again, so that it is one max_conns may reclaim.
func TestHTTP2ResetStreamsHoldNoSlot(t *testing.T) {
	p := newPKI(t)
	g := newGate()
	gw := start(t, backend(t, g.ServeHTTP).URL, minimal+tlsConfig(p)+
		"limits: {max_concurrency_per_group: 2, max_in_flight_per_group: 2, queue_threshold_per_group: 0}\n")
	h := dialH2(t, gw.url, p)
	h.request(1, http.MethodGet, "a")
	h.request(3, http.MethodGet, "a")
	g.await(t, 2)
	h.reset(1)
	h.reset(3)
	eventually(t, "the reset requests to leave the gateway", func() bool {
		return metric(t, gw.gw.Metrics(), inGatewayGauge) == 0
	})
	eventually(t, "the reset requests to be counted", func() bool { return counted(t, gw.gw.Metrics()) == 2 })
	if s, ok := gw.gw.Executor().GroupStats("a"); ok && s.InFlight != 0 {
		t.Errorf("tenant a has %d requests in flight after both were reset", s.InFlight)
	}
	if got := metric(t, gw.gw.Metrics(), requestsTotal, "code", "499"); got != 2 {
		t.Errorf("%s{code=499} = %v, want 2", requestsTotal, got)
	}
	eventually(t, "the connection to be idle", func() bool { return gateway.IdleConns(gw.gw) == 1 })
	// The tenant's two places are free: two more streams reach the backend.
	h.request(5, http.MethodGet, "a")
	h.request(7, http.MethodGet, "a")
	g.await(t, 2)
	close(g.release)
}

// A stream reset while its body is on its way is a request whose client
// went away (499), not a body the client got wrong (400 bad_body, counted
// in rejected_total).
func TestHTTP2StreamResetDuringBodyIsClientGone(t *testing.T) {
	p := newPKI(t)
	be := backend(t, func(w http.ResponseWriter, r *http.Request) { t.Error("the backend got a request") })
	gw := start(t, be.URL, minimal+tlsConfig(p))
	h := dialH2(t, gw.url, p)
	h.request(1, http.MethodPost, "a")
	h.data(1, "part of the body", false)
	eventually(t, "the request to arrive", func() bool { return metric(t, gw.gw.Metrics(), inGatewayGauge) == 1 })
	h.reset(1)
	eventually(t, "the reset request to leave the gateway", func() bool {
		return metric(t, gw.gw.Metrics(), inGatewayGauge) == 0
	})
	eventually(t, "the reset request to be counted", func() bool { return counted(t, gw.gw.Metrics()) == 1 })
	if got := metric(t, gw.gw.Metrics(), "rejected_total", "reason", "bad-body"); got != 0 {
		t.Errorf("rejected_total{reason=bad-body} = %v after a stream the client reset, want 0", got)
	}
	if got := metric(t, gw.gw.Metrics(), requestsTotal, "code", "499"); got != 1 {
		t.Errorf("%s{code=499} = %v, want 1", requestsTotal, got)
	}
}
