package gateway_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// framer is an HTTP/2 client connection driven frame by frame with
// x/net's Framer, as a hostile client would: nothing of net/http's client
// keeps it within the server's limits.
type framer struct {
	*http2.Framer
	c *tls.Conn
}

// dialFramer opens an HTTP/2 connection to the gateway at url, served over
// TLS with a certificate of p's CA, sends the preface and its settings, and
// reads the server's settings (acknowledging them, so that the server
// enforces them as announced). It returns the server's
// SETTINGS_MAX_CONCURRENT_STREAMS.
func dialFramer(t *testing.T, url string, p *pki) (*framer, uint32) {
	t.Helper()
	c := dialTLSH2(t, url, p)
	c.SetDeadline(time.Now().Add(bound))
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	f := &framer{Framer: http2.NewFramer(c, c), c: c}
	f.WriteSettings()
	fr, err := f.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	sf, ok := fr.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		t.Fatalf("first frame %v, want the server's SETTINGS", fr)
	}
	streams, _ := sf.Value(http2.SettingMaxConcurrentStreams)
	f.WriteSettingsAck()
	return f, streams
}

// get opens stream id with a GET for tenant, ending the stream.
func (f *framer) get(id uint32, tenant string) error {
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, hf := range []hpack.HeaderField{
		{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "https"},
		{Name: ":path", Value: "/"}, {Name: ":authority", Value: "127.0.0.1"},
		{Name: "x-tenant", Value: tenant},
	} {
		enc.WriteField(hf)
	}
	return f.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true})
}

// resets reads frames until it has seen a RST_STREAM for each of ids,
// and fails the test if any carries another code than one of codes, or if
// the server ends the connection first.
func (f *framer) resets(t *testing.T, ids map[uint32]bool, codes ...http2.ErrCode) {
	t.Helper()
	for len(ids) > 0 {
		fr, err := f.ReadFrame()
		if err != nil {
			t.Fatalf("waiting for streams %v to be refused: %v", ids, err)
		}
		switch fr := fr.(type) {
		case *http2.RSTStreamFrame:
			if !ids[fr.StreamID] {
				t.Fatalf("stream %d reset (%v), not one over the limit", fr.StreamID, fr.ErrCode)
			}
			delete(ids, fr.StreamID)
			ok := false
			for _, c := range codes {
				ok = ok || fr.ErrCode == c
			}
			if !ok {
				t.Errorf("stream %d reset with %v, want one of %v", fr.StreamID, fr.ErrCode, codes)
			}
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY (%v) while streams %v wait to be refused", fr.ErrCode, ids)
		}
	}
}

// A client opening more streams on a connection than http2_max_streams
// has the streams over it refused at once, not queued: the requests it
// holds are at the backend, and the others never reach the gateway.
// RFC 9113 section 5.1.2 lets a server refuse them with PROTOCOL_ERROR
// or REFUSED_STREAM; net/http sends REFUSED_STREAM while its settings are
// unacknowledged, PROTOCOL_ERROR once the client has acknowledged them.
func TestHTTP2StreamsOverTheCapRefused(t *testing.T) {
	p := newPKI(t)
	g, gw := gated(t, minimal+tlsConfig(p)+"http2_max_streams: 2\n"+
		"limits: {max_concurrency_per_group: 2, max_in_flight_per_group: 2, queue_threshold_per_group: 0}\n")
	t.Cleanup(func() { close(g.release) }) // before the gateway and the backend stop
	f, streams := dialFramer(t, gw.url, p)
	if streams != 2 {
		t.Fatalf("the server announces %d streams, want 2", streams)
	}
	for _, id := range []uint32{1, 3} {
		if err := f.get(id, "a"); err != nil {
			t.Fatal(err)
		}
	}
	g.await(t, 2)
	over := map[uint32]bool{}
	for id := uint32(5); id < 5+2*20; id += 2 {
		if err := f.get(id, "a"); err != nil {
			t.Fatal(err)
		}
		over[id] = true
	}
	f.resets(t, over, http2.ErrCodeRefusedStream, http2.ErrCodeProtocol)
	if got := metric(t, gw.gw.Metrics(), inGatewayGauge); got != 2 {
		t.Errorf("%v requests in the gateway, want the 2 under the cap", got)
	}
	select {
	case tenant := <-g.arrived:
		t.Errorf("a stream over the cap reached the backend (tenant %s)", tenant)
	default:
	}
}

// A client opening streams and resetting them at once, as fast as it can
// (CVE-2023-44487, "rapid reset"), leaves no tenant slot or executor
// permit held, and takes no capacity from another tenant: whatever the
// server does with the flood (it may end the connection), the other
// tenant's requests are served beside it, and once it is over the gateway
// and the executor are back at zero and the flooding tenant is served
// again.
func TestHTTP2RapidResetHoldsNoCapacity(t *testing.T) {
	p := newPKI(t)
	// Tenant b is answered at once; tenant a's requests are held until
	// their client goes away or the test releases them. Some of the
	// flood's requests may reach the backend before their reset does; the
	// requests sent after the flood ask for /after, and say when they
	// arrive.
	arrived, release := make(chan struct{}, 2), make(chan struct{})
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Tenant") == "b" {
			return
		}
		if r.URL.Path == "/after" {
			arrived <- struct{}{}
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	gw := start(t, be.URL, minimal+tlsConfig(p)+"http2_max_streams: 4\n"+
		"limits: {global_max_in_flight: 4, max_concurrency_per_group: 2, max_in_flight_per_group: 2, queue_threshold_per_group: 0}\n")
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free) // before the gateway and the backend stop, if the test fails
	m := gw.gw.Metrics()
	f, _ := dialFramer(t, gw.url, p)
	// The server's frames are read so that its writes never block.
	// settled closes when the server has read the whole flood (it
	// acknowledges the ping sent after it) or gives up on the connection
	// (net/http answers a flood with GOAWAY ENHANCE_YOUR_CALM, or closes).
	settled := make(chan struct{})
	go func() {
		defer close(settled)
		for {
			fr, err := f.ReadFrame()
			if err != nil {
				return
			}
			if pf, ok := fr.(*http2.PingFrame); ok && pf.IsAck() {
				return
			}
			if _, ok := fr.(*http2.GoAwayFrame); ok {
				return
			}
		}
	}()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: poolOf(p)}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr, Timeout: bound}
	url := strings.Replace(gw.url, "http://", "https://", 1)
	const flood = 2000
	ended := false
	for i, id := 0, uint32(1); i < flood && !ended; i, id = i+1, id+2 {
		// An error is the server ending the connection: the flood is over.
		ended = f.get(id, "a") != nil || f.WriteRSTStream(id, http2.ErrCodeCancel) != nil
		if i%500 == 0 {
			if resp, _ := do(t, c, http.MethodGet, url, "b", nil); resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
				t.Fatalf("tenant b during the flood: %d over HTTP/%d, want 200 over HTTP/2", resp.StatusCode, resp.ProtoMajor)
			}
		}
	}
	// The server acknowledges a ping once it has read every frame before
	// it: every reset has then ended its request's context. Closing the
	// connection then ends the streams the server has not yet started.
	f.WritePing(false, [8]byte{1})
	select {
	case <-settled:
	case <-time.After(bound):
		t.Fatal("the server neither acknowledged a ping after the flood nor ended the connection")
	}
	f.c.Close()
	tr.CloseIdleConnections()
	eventually(t, "the flood to leave the gateway and the executor", func() bool {
		s := gw.gw.Executor().Stats()
		a, _ := gw.gw.Executor().GroupStats("a")
		return metric(t, m, "gateway_connections") == 0 && metric(t, m, inGatewayGauge) == 0 &&
			s.Running == 0 && s.Waiting == 0 && a.InFlight == 0
	})
	// Tenant a's two places are free: two requests reach the backend.
	done := []<-chan int{goDo(t, c, url+"/after", "a"), goDo(t, c, url+"/after", "a")}
	for range 2 {
		select {
		case <-arrived:
		case <-time.After(bound):
			t.Fatal("tenant a's requests after the flood did not reach the backend")
		}
	}
	free()
	for _, d := range done {
		if code := <-d; code != http.StatusOK {
			t.Errorf("tenant a after the flood: %d", code)
		}
	}
}

func poolOf(p *pki) *x509.CertPool {
	roots := x509.NewCertPool()
	roots.AddCert(p.ca)
	return roots
}
