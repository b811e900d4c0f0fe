package gateway_test

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/groupexec/groupexec/gateway"
)

// windowBackend is an https backend speaking HTTP/2 frame by frame: it
// answers the first request with a body that never ends, sent as fast as
// the gateway's flow-control windows let it, and reports how much it had
// sent each time it had to stop for want of window. What it sends and the
// gateway has not passed on to its client is held in the gateway's memory.
type windowBackend struct {
	blocked chan int64 // the bytes sent, each time the windows are spent
}

// listenH2 listens on loopback for TLS connections, with p's certificate,
// that speak HTTP/2 alone.
func listenH2(t *testing.T, p *pki) net.Listener {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(p.certFile, p.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func startWindowBackend(t *testing.T, p *pki) (url string, wb *windowBackend) {
	t.Helper()
	ln := listenH2(t, p)
	wb = &windowBackend{blocked: make(chan int64, 1)}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		t.Cleanup(func() { c.Close() })
		wb.serve(t, c)
	})
	return "https://" + ln.Addr().String(), wb
}

func (wb *windowBackend) serve(t *testing.T, c net.Conn) {
	c.SetDeadline(time.Now().Add(bound))
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil {
		t.Errorf("backend: reading the preface: %v", err)
		return
	}
	f := http2.NewFramer(c, c)
	var mu sync.Mutex // guards the windows and the framer's writes
	cond := sync.NewCond(&mu)
	connWin, streamWin := int64(65535), int64(65535)
	stream := uint32(0)
	mu.Lock()
	f.WriteSettings()
	mu.Unlock()
	// The gateway's frames: its settings (the stream's initial window),
	// the request, and the window updates as it passes the body on.
	go func() {
		defer cond.Broadcast()
		for {
			fr, err := f.ReadFrame()
			if err != nil {
				mu.Lock()
				stream = ^uint32(0) // ends the writer
				mu.Unlock()
				return
			}
			mu.Lock()
			switch fr := fr.(type) {
			case *http2.SettingsFrame:
				if !fr.IsAck() {
					if v, ok := fr.Value(http2.SettingInitialWindowSize); ok {
						streamWin += int64(v) - 65535
					}
					f.WriteSettingsAck()
				}
			case *http2.HeadersFrame:
				if stream == 0 {
					stream = fr.StreamID
				}
			case *http2.WindowUpdateFrame:
				if fr.StreamID == 0 {
					connWin += int64(fr.Increment)
				} else {
					streamWin += int64(fr.Increment)
				}
			}
			mu.Unlock()
			cond.Broadcast()
		}
	}()
	mu.Lock()
	defer mu.Unlock()
	for stream == 0 {
		cond.Wait()
	}
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
	enc.WriteField(hpack.HeaderField{Name: "content-type", Value: "application/octet-stream"})
	f.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: block.Bytes(), EndHeaders: true})
	chunk := make([]byte, 16<<10)
	var sent int64
	for stream != ^uint32(0) {
		n := min(int64(len(chunk)), connWin, streamWin)
		if n == 0 {
			select {
			case wb.blocked <- sent:
			default:
			}
			cond.Wait()
			continue
		}
		if f.WriteData(stream, false, chunk[:n]) != nil {
			return
		}
		sent += n
		connWin -= n
		streamWin -= n
	}
}

// An https backend speaking HTTP/2 may send an answer ahead of what the
// gateway has passed on to its client only as far as a window of
// gateway.BackendStreamWindow: to a client that does not take a streamed
// answer, the gateway holds that much of it in memory at most, beside
// response.buffer_bytes. net/http's transport grants 4 MiB a stream, 64
// times the default buffer, and 1 GiB a connection.
func TestHTTP2BackendSendsAheadOnlyItsWindow(t *testing.T) {
	p := newPKI(t)
	url, wb := startWindowBackend(t, p)
	g := build(t, url, minimal+tlsConfig(p)+"response: {buffer_bytes: 1024}\ntimeouts: {write: 1h, upstream: 1h}\n")
	gateway.TrustBackends(g, poolOf(p))
	gw := serve(t, g)
	// A client granting its stream no window beyond the first 64 KiB,
	// and reading nothing.
	f, _ := dialFramer(t, gw.url, p)
	if err := f.get(1, "a"); err != nil {
		t.Fatal(err)
	}
	var sent int64
	select {
	case sent = <-wb.blocked:
	case <-time.After(bound):
		t.Fatal("the backend never ran out of window")
	}
	// What the gateway has read of the answer: its buffer, the 64 KiB the
	// client's window took, the proxy's copy buffer, the server's own
	// buffers; generously.
	const passedOn = 256 << 10
	if limit := int64(passedOn + gateway.BackendStreamWindow); sent > limit {
		t.Errorf("the backend sent %d bytes of an answer the client took none of, want %d at most", sent, limit)
	}
}
