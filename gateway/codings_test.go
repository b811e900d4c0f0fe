package gateway_test

import (
	"bytes"
	"compress/zlib"
	"crypto/rand"
	"net/http"
	"testing"
)

// Every content coding the gateway accepts is decoded under the caps, as
// the backend would decode it: x-gzip is gzip (RFC 9110 8.4.1.3), identity
// entries change nothing, stacked codings are undone in order; a coding it
// cannot decode is refused rather than passed on unchecked.
func TestContentCodingsAreCapped(t *testing.T) {
	gw := start(t, echo(t), minimal+"body: {max_bytes: 100000, max_decoded_bytes: 50000, max_ratio: 10}\n")
	c := client(t)
	bomb := make([]byte, 40000) // zeros: compresses far past the ratio
	small := make([]byte, 800)  // random: incompressible, well within the ratio
	rand.Read(small)
	deflate := func(b []byte) []byte {
		var buf bytes.Buffer
		zw := zlib.NewWriter(&buf)
		zw.Write(b)
		zw.Close()
		return buf.Bytes()
	}
	for _, tc := range []struct {
		name, coding string
		body         []byte
		want         int
		got          string // the backend's X-Got, for 200
	}{
		{"x-gzip bomb", "x-gzip", gz(t, bomb), 413, ""},
		{"gzip, identity bomb", "gzip, identity", gz(t, bomb), 413, ""},
		{"identity, gzip bomb", "identity,gzip", gz(t, bomb), 413, ""},
		{"stacked gzip bomb", "gzip, gzip", gz(t, gz(t, bomb)), 413, ""},
		{"upper-case GZIP bomb", "GZIP", gz(t, bomb), 413, ""},
		{"deflate bomb", "deflate", deflate(bomb), 413, ""},
		{"stacked gzip", "gzip, gzip", gz(t, gz(t, small)), 200, "800,"},
		{"deflate then gzip", "deflate, gzip", gz(t, deflate(small)), 200, "800,"},
		{"x-gzip", "x-gzip", gz(t, small), 200, "800,"},
		{"identity", "identity", small, 200, "800,"},
		{"brotli", "br", small, 415, ""},
		{"three layers", "gzip, gzip, gzip", gz(t, gz(t, gz(t, small))), 415, ""},
		{"x-gzip not gzip", "x-gzip", small, 400, ""},
		{"bytes after a deflate stream", "deflate", append(deflate(small), "more"...), 400, ""},
		{"bytes after a gzip stream", "gzip", append(gz(t, small), "more"...), 400, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := do(t, c, http.MethodPost, gw.url, "a", bytes.NewReader(tc.body), "Content-Encoding", tc.coding)
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d (%q)", resp.StatusCode, tc.want, body)
			}
			if tc.got != "" && resp.Header.Get("X-Got") != tc.got {
				t.Errorf("backend got %q, want %q", resp.Header.Get("X-Got"), tc.got)
			}
		})
	}
	m := gw.gw.Metrics()
	if metric(t, m, "rejected_total", "reason", "decoded-ratio") == 0 {
		t.Error("no rejected_total{reason=decoded-ratio}")
	}
	if metric(t, m, "rejected_total", "reason", "unsupported-encoding") != 2 {
		t.Error("rejected_total{reason=unsupported-encoding} != 2")
	}
}

// A max_ratio so large that it times the bytes received overflows int64
// bounds nothing more than max_decoded_bytes does: a coded body within
// max_decoded_bytes passes, rather than being refused as a bomb because
// the product went negative.
func TestHugeMaxRatioPassesCodedBodies(t *testing.T) {
	gw := start(t, echo(t), minimal+"body: {max_bytes: 100000, max_decoded_bytes: 50000, max_ratio: 9223372036854775807}\n")
	small := make([]byte, 800)
	rand.Read(small)
	resp, body := do(t, client(t), http.MethodPost, gw.url, "a", bytes.NewReader(gz(t, small)), "Content-Encoding", "gzip")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Got") != "800," {
		t.Fatalf("status %d, X-Got %q, body %q; want 200 and 800 bytes", resp.StatusCode, resp.Header.Get("X-Got"), body)
	}
	bomb := make([]byte, 60000) // over max_decoded_bytes
	resp, body = do(t, client(t), http.MethodPost, gw.url, "a", bytes.NewReader(gz(t, bomb)), "Content-Encoding", "gzip")
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over max_decoded_bytes: status %d (%q), want 413", resp.StatusCode, body)
	}
}
