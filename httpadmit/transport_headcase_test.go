package httpadmit_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/policy"
)

// casefoldingServer answers each request on its listener as a server that
// upper-cases the method does (gunicorn with casefold_http_method): a
// "head" is a HEAD, answered with the Content-Length of the body it does
// not send. It reports each request line it reads on lines.
func casefoldingServer(t *testing.T) (addr string, lines <-chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan string, 16)
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			br := bufio.NewReader(c)
			line, _ := br.ReadString('\n')
			ch <- strings.TrimSpace(line)
			for {
				h, err := br.ReadString('\n')
				if err != nil || h == "\r\n" {
					break
				}
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n") // a HEAD's answer: no body
			c.Close()
		}
	}()
	return ln.Addr().String(), ch
}

// A HEAD in another case ("head", "Head") is a method of its own to
// net/http's transport, which reads the body its answer's Content-Length
// announces, while a server that upper-cases the method answers it as a
// HEAD, without the body: the caller waited for a body that never came,
// holding the destination's slot until its context ended. It is refused
// before admission, unsent, as the gateway refuses it, and takes no slot.
func TestTransportRefusesHeadInAnotherCase(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)})
	addr, lines := casefoldingServer(t)
	rt := httpadmit.Transport(ex, &http.Transport{DisableKeepAlives: true})
	u := &url.URL{Scheme: "http", Host: addr, Path: "/"}
	for _, m := range []string{"head", "Head", "hEAD"} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req := (&http.Request{Method: m, URL: u, Header: http.Header{}, Host: u.Host}).WithContext(ctx)
		resp, err := rt.RoundTrip(req)
		if err == nil {
			_, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			cancel()
			t.Fatalf("method %q: sent, its body read ended with %v", m, rerr)
		}
		cancel()
		if errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "HEAD") {
			t.Errorf("method %q: %v; want a refusal naming HEAD", m, err)
		}
	}
	select {
	case l := <-lines:
		t.Errorf("the server got %q", l)
	default:
	}
	if s, _ := ex.GroupStats(addr); s.Submitted != 0 {
		t.Errorf("%d requests reached the executor; want none", s.Submitted)
	}
	// HEAD itself is sent, and answered without a body.
	resp, err := rt.RoundTrip(&http.Request{Method: http.MethodHead, URL: u, Header: http.Header{}, Host: u.Host})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if l := <-lines; l != "HEAD / HTTP/1.1" {
		t.Errorf("the server got %q", l)
	}
}
