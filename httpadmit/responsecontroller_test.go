package httpadmit_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
)

// http.ResponseController's Flush on next's writer sends what next wrote
// to the client while next still runs: a streaming next behind Handler
// streams. The client reads the first line before next writes the second.
func TestHandlerResponseControllerFlushReachesTheClient(t *testing.T) {
	for _, wk := range writerKinds {
		t.Run(wk.name, func(t *testing.T) {
			ctx := guarded(t)
			ex := newExec(t, nil)
			clientRead := make(chan struct{})
			srv := serve(t, httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, "first\n")
				if err := http.NewResponseController(w).Flush(); err != nil {
					t.Errorf("Flush: %v", err)
					return
				}
				select {
				case <-clientRead:
				case <-r.Context().Done(): // the client gave up waiting
					return
				}
				io.WriteString(w, "second\n")
			}), wk.opts...))
			resp, err := srv.Client().Do(clientRequest(t, ctx, http.MethodGet, srv.URL, nil))
			if err != nil {
				t.Fatalf("no response while next waits after its flush: %v", err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			line, err := br.ReadString('\n')
			if err != nil || line != "first\n" {
				t.Fatalf("read %q, %v before next went on; want the flushed line", line, err)
			}
			close(clientRead)
			if rest, err := io.ReadAll(br); err != nil || string(rest) != "second\n" {
				t.Errorf("then %q, %v; want %q", rest, err, "second\n")
			}
		})
	}
}

// SetWriteDeadline on next's writer bounds the server's writes to the
// connection: with the deadline passed, the flush fails with
// os.ErrDeadlineExceeded and the client gets no response.
func TestHandlerResponseControllerWriteDeadlineBoundsTheConnection(t *testing.T) {
	for _, wk := range writerKinds {
		t.Run(wk.name, func(t *testing.T) {
			ctx := guarded(t)
			ex := newExec(t, nil)
			flushed := make(chan error, 1)
			srv := serve(t, httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				rc := http.NewResponseController(w)
				if err := rc.SetWriteDeadline(time.Now().Add(-time.Second)); err != nil {
					flushed <- fmt.Errorf("SetWriteDeadline: %w", err)
					return
				}
				io.WriteString(w, "never sent")
				flushed <- rc.Flush()
			}), wk.opts...))
			resp, err := srv.Client().Do(clientRequest(t, ctx, http.MethodGet, srv.URL, nil))
			if err == nil {
				resp.Body.Close()
				t.Errorf("the client got %d past the server's write deadline", resp.StatusCode)
			}
			if err := <-flushed; !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("flush past the write deadline: %v, want os.ErrDeadlineExceeded", err)
			}
		})
	}
}

// SetReadDeadline on next's writer bounds the server's reads of the
// request: with the deadline passed, reading a body the client has not sent
// fails with os.ErrDeadlineExceeded instead of waiting for it.
func TestHandlerResponseControllerReadDeadlineBoundsTheBody(t *testing.T) {
	for _, wk := range writerKinds {
		t.Run(wk.name, func(t *testing.T) {
			ctx := guarded(t)
			ex := newExec(t, nil)
			read := make(chan error, 1)
			srv := serve(t, httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
					read <- fmt.Errorf("SetReadDeadline: %w", err)
					return
				}
				_, err := r.Body.Read(make([]byte, 1))
				read <- err
			}), wk.opts...))
			body, send := io.Pipe() // the client sends its headers, never its body
			done := make(chan struct{})
			go func() {
				defer close(done)
				if resp, err := srv.Client().Do(clientRequest(t, ctx, http.MethodPost, srv.URL, body)); err == nil {
					resp.Body.Close()
				}
			}()
			if err := <-read; !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("reading the body past the read deadline: %v, want os.ErrDeadlineExceeded", err)
			}
			send.Close()
			<-done
		})
	}
}

// EnableFullDuplex on next's writer lets next answer an HTTP/1 request
// while it still reads its body: each line the client sends is answered
// before the client sends the next. Without it, net/http reads the rest of
// the body at the first flush, and the exchange would stall.
func TestHandlerResponseControllerFullDuplexInterleaves(t *testing.T) {
	for _, wk := range writerKinds {
		t.Run(wk.name, func(t *testing.T) {
			ctx := guarded(t)
			ex := newExec(t, nil)
			srv := serve(t, httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				rc := http.NewResponseController(w)
				if err := rc.EnableFullDuplex(); err != nil {
					t.Errorf("EnableFullDuplex: %v", err)
					return
				}
				br := bufio.NewReader(r.Body)
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					io.WriteString(w, "pong "+strings.TrimPrefix(line, "ping "))
					if err := rc.Flush(); err != nil {
						return
					}
				}
			}), wk.opts...))
			body, send := io.Pipe()
			defer send.Close()
			// The client's Do returns only once its transport stops reading
			// the body: the guard must end the body too.
			context.AfterFunc(ctx, func() { send.CloseWithError(ctx.Err()) })
			type result struct {
				resp *http.Response
				err  error
			}
			got := make(chan result, 1)
			go func() {
				resp, err := srv.Client().Do(clientRequest(t, ctx, http.MethodPost, srv.URL, body))
				got <- result{resp, err}
			}()
			io.WriteString(send, "ping 1\n")
			r := <-got
			if r.err != nil {
				t.Fatalf("no response while the body is open: %v", r.err)
			}
			defer r.resp.Body.Close()
			br := bufio.NewReader(r.resp.Body)
			for i := 1; i <= 3; i++ {
				if i > 1 {
					fmt.Fprintf(send, "ping %d\n", i)
				}
				if line, err := br.ReadString('\n'); err != nil || line != fmt.Sprintf("pong %d\n", i) {
					t.Fatalf("answer %d: %q, %v", i, line, err)
				}
			}
			send.Close()
			if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
				t.Errorf("after the body ended: %q, %v; want the response's end", rest, err)
			}
		})
	}
}

// Hijack through http.ResponseController on next's writer hands next the
// connection, on which it writes its own response, which the client reads.
func TestHandlerResponseControllerHijackHandsOverTheConnection(t *testing.T) {
	for _, wk := range writerKinds {
		t.Run(wk.name, func(t *testing.T) {
			ctx := guarded(t)
			ev := newEvents()
			ex := newExec(t, nil, ev.listener())
			srv := serve(t, httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				conn, brw, err := http.NewResponseController(w).Hijack()
				if err != nil {
					t.Errorf("Hijack: %v", err)
					return
				}
				defer conn.Close()
				brw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\nX-Hijacked: yes\r\n\r\nhijacked")
				brw.Flush()
			}), wk.opts...))
			req := clientRequest(t, ctx, http.MethodGet, srv.URL, nil)
			req.Close = true // the connection is next's: it is not reused
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil || resp.Header.Get("X-Hijacked") != "yes" || string(b) != "hijacked" {
				t.Errorf("got %d %v %q, %v; want the response next wrote on the connection", resp.StatusCode, resp.Header, b, err)
			}
			if e := next(t, ev.completed); e.Status != executor.Success {
				t.Errorf("hijacked request ended %v %v, want Success", e.Status, e.Err)
			}
		})
	}
}
