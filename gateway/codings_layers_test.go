package gateway_test

import (
	"bytes"
	"net/http"
	"testing"
)

// emptyBlocksGzip is a valid gzip stream of n empty deflate blocks that
// decodes to nothing: 5 bytes a block, which a gzip layer over it
// compresses about 700 times.
func emptyBlocksGzip(n int) []byte {
	var b bytes.Buffer
	b.Write([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}) // gzip header: deflate, no flags, unknown OS
	b.Write(bytes.Repeat([]byte{0x00, 0x00, 0x00, 0xff, 0xff}, n))
	b.Write([]byte{0x01, 0x00, 0x00, 0xff, 0xff}) // the last block, empty too
	b.Write(make([]byte, 8))                      // CRC-32 and size of nothing
	return b.Bytes()
}

// The caps hold for every layer of stacked codings, not only the last:
// a body whose outer layer decodes to megabytes of an inner layer that
// decodes to nothing passed both max_decoded_bytes and max_ratio, which
// counted only the last layer's bytes, while the gateway decoded the
// middle layer whole, CPU-bound: a 146 KB body of 100 MB of empty blocks
// took 0.6 s of a core, and a 1 MB body (the default max_bytes) holds
// about seven times as many.
func TestStackedCodingsCappedAtEveryLayer(t *testing.T) {
	gw := start(t, echo(t), minimal+"body: {max_bytes: 100000, max_decoded_bytes: 50000, max_ratio: 10}\n")
	inner := emptyBlocksGzip(200_000) // 1 MB decoded by the outer layer
	body := gz(t, inner)
	if len(body) > 20000 {
		t.Fatalf("the outer layer is %d bytes: the test wants it far under max_decoded_bytes", len(body))
	}
	resp, got := do(t, client(t), http.MethodPost, gw.url, "a", bytes.NewReader(body), "Content-Encoding", "gzip, gzip")
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d (%q), want 413: the middle layer decoded past the caps", resp.StatusCode, got)
	}
	m := gw.gw.Metrics()
	if n := metric(t, m, "rejected_total", "reason", "decoded-size") + metric(t, m, "rejected_total", "reason", "decoded-ratio"); n != 1 {
		t.Errorf("rejected_total{reason=decoded-size or decoded-ratio} = %v, want 1", n)
	}
	// Stacked layers within the caps still pass, as before.
	small := emptyBlocksGzip(10) // 68 bytes decoded by the outer layer
	resp, got = do(t, client(t), http.MethodPost, gw.url, "a", bytes.NewReader(gz(t, small)), "Content-Encoding", "gzip, gzip")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Got") != "0," {
		t.Errorf("a small stacked body: status %d, X-Got %q (%q), want 200 and 0 bytes", resp.StatusCode, resp.Header.Get("X-Got"), got)
	}
}
