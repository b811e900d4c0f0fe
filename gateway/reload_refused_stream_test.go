package gateway_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/groupexec/groupexec/gateway"
)

// refusingBackend is an https backend speaking HTTP/2 frame by frame that
// refuses the first stream of all (RST_STREAM REFUSED_STREAM) once the
// test releases it, and answers every later one 200 "ok": net/http's
// transport sends a refused request again, on the same connection.
type refusingBackend struct {
	url      string
	arrived  chan struct{} // the first request is in
	release  chan struct{} // refuse it
	accepted atomic.Int32
	closed   chan struct{} // a value as each connection ends
}

func startRefusingBackend(t *testing.T, p *pki) *refusingBackend {
	t.Helper()
	ln := listenH2(t, p)
	b := &refusingBackend{url: "https://" + ln.Addr().String(), arrived: make(chan struct{}, 1),
		release: make(chan struct{}), closed: make(chan struct{}, 10)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	var refused atomic.Bool
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer func() { b.closed <- struct{}{} }()
				defer c.Close()
				b.serve(c, &refused)
			})
		}
	})
	return b
}

func (b *refusingBackend) serve(c net.Conn, refused *atomic.Bool) {
	c.SetDeadline(time.Now().Add(bound))
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil {
		return
	}
	f := http2.NewFramer(c, c)
	f.WriteSettings()
	for {
		fr, err := f.ReadFrame()
		if err != nil {
			return
		}
		switch fr := fr.(type) {
		case *http2.SettingsFrame:
			if !fr.IsAck() {
				f.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !fr.IsAck() {
				f.WritePing(true, fr.Data)
			}
		case *http2.HeadersFrame:
			if refused.CompareAndSwap(false, true) {
				b.arrived <- struct{}{}
				<-b.release
				f.WriteRSTStream(fr.StreamID, http2.ErrCodeRefusedStream)
				continue
			}
			var block bytes.Buffer
			enc := hpack.NewEncoder(&block)
			enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
			enc.WriteField(hpack.HeaderField{Name: "content-length", Value: "2"})
			f.WriteHeaders(http2.HeadersFrameParam{StreamID: fr.StreamID, BlockFragment: block.Bytes(), EndHeaders: true})
			f.WriteData(fr.StreamID, true, []byte("ok"))
		}
	}
}

// A request in flight on an HTTP/2 connection to a backend a reload
// removed, whose stream the backend refuses (REFUSED_STREAM), is sent
// again by net/http's transport on the same connection: it is answered
// there, the connection kept open for it, not closed as the refused
// stream's hold ends and a new one dialed.
func TestReloadKeepsARemovedHTTP2BackendsConnForARefusedStreamsRetry(t *testing.T) {
	p := newPKI(t)
	removed := startRefusingBackend(t, p)
	other := backend(t, func(http.ResponseWriter, *http.Request) {})
	g := build(t, removed.url, minimal)
	gateway.TrustBackends(g, poolOf(p))
	gw := serve(t, g)
	done := make(chan string, 1)
	go func() {
		resp, err := client(t).Get(gw.url)
		if err != nil {
			done <- err.Error()
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- resp.Status + " " + string(body)
	}()
	awaitArrival(t, removed.arrived)

	reloadBackends(t, gw, other.URL)
	close(removed.release)
	select {
	case got := <-done:
		if got != "200 OK ok" {
			t.Fatalf("the request in flight across the reload got %q, want 200 OK ok", got)
		}
	case <-time.After(bound):
		t.Fatal("the request in flight across the reload was not answered")
	}
	if n := removed.accepted.Load(); n != 1 {
		t.Errorf("the removed backend got %d connections, want the request's one kept for its retry", n)
	}
	select {
	case <-removed.closed:
	case <-time.After(bound):
		t.Fatalf("the connection to the removed backend is still open after %v", bound)
	}
}
