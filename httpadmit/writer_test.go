package httpadmit_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/httpadmit"
)

// pusher is a server's writer that supports HTTP/2 server push.
type pusher struct {
	*httptest.ResponseRecorder
	pushed []string
}

func (p *pusher) Push(target string, _ *http.PushOptions) error {
	p.pushed = append(p.pushed, target)
	return nil
}

// serveWith runs h for one request of tenant a, written to w.
func serveWith(h http.Handler, w http.ResponseWriter) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("X-Tenant", "a")
	h.ServeHTTP(w, r)
}

// With WithFailureStatus, next still finds http.Pusher on its writer when
// the server's writer has it (HTTP/2), as it does behind
// http.TimeoutHandler: http.ResponseController has no Push, so a writer that
// hid it would turn every push off.
func TestHandlerFailureStatusKeepsPusher(t *testing.T) {
	ex := newExec(t, nil)
	var pushErr error
	ok := false
	h := httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p http.Pusher
		if p, ok = w.(http.Pusher); ok {
			pushErr = p.Push("/style.css", nil)
		}
	}), httpadmit.WithFailureStatus(func(c int) bool { return c >= 500 }))
	w := &pusher{ResponseRecorder: httptest.NewRecorder()}
	serveWith(h, w)
	if !ok || pushErr != nil || len(w.pushed) != 1 || w.pushed[0] != "/style.css" {
		t.Fatalf("next's writer is a Pusher: %v, Push: %v, the server's writer pushed %q", ok, pushErr, w.pushed)
	}

	// Over HTTP/1 the writer has no Push: next is told so, as by net/http.
	h = httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, isPusher := w.(http.Pusher); isPusher {
			pushErr = p.Push("/style.css", nil)
		}
	}), httpadmit.WithFailureStatus(func(c int) bool { return c >= 500 }))
	pushErr = nil
	serveWith(h, httptest.NewRecorder())
	if pushErr != nil && !errors.Is(pushErr, http.ErrNotSupported) {
		t.Errorf("Push without a Pusher below: %v, want http.ErrNotSupported", pushErr)
	}
}

// failingFlush is a server's writer whose flush fails, as net/http's does
// once its client has gone.
type failingFlush struct{ *httptest.ResponseRecorder }

var errFlush = errors.New("write: broken pipe")

func (failingFlush) FlushError() error { return errFlush }

// With WithFailureStatus, http.ResponseController's Flush still reports
// what the server's writer reports: its error (a streaming handler's sign
// that the client is gone), or http.ErrNotSupported from a writer that
// cannot flush. A Flush that returns nothing would make both a success.
func TestHandlerFailureStatusFlushReportsErrors(t *testing.T) {
	ex := newExec(t, nil)
	var flushErr error
	h := httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		flushErr = http.NewResponseController(w).Flush()
	}), httpadmit.WithFailureStatus(func(c int) bool { return c >= 500 }))
	for _, tc := range []struct {
		name string
		w    http.ResponseWriter
		want error
	}{
		{"a failing flush", failingFlush{httptest.NewRecorder()}, errFlush},
		{"no flush", struct{ http.ResponseWriter }{httptest.NewRecorder()}, http.ErrNotSupported},
		{"a flush", httptest.NewRecorder(), nil},
	} {
		flushErr = errors.New("next did not run")
		serveWith(h, tc.w)
		if !errors.Is(flushErr, tc.want) {
			t.Errorf("%s: ResponseController.Flush: %v, want %v", tc.name, flushErr, tc.want)
		}
	}
}

// A flush the server's writer cannot do writes no header: the status next
// writes after it is the response's, and the one WithFailureStatus judges.
func TestHandlerFailureStatusAfterUnsupportedFlush(t *testing.T) {
	ex := newExec(t, nil)
	var told []int
	h := httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).Flush()
		w.WriteHeader(http.StatusServiceUnavailable)
	}), httpadmit.WithFailureStatus(func(c int) bool { told = append(told, c); return c >= 500 }))
	serveWith(h, struct{ http.ResponseWriter }{httptest.NewRecorder()})
	if len(told) != 1 || told[0] != http.StatusServiceUnavailable {
		t.Fatalf("the failure function was told %v, want [503]", told)
	}
	if s, _ := ex.GroupStats("a"); s.Failed != 1 {
		t.Errorf("%+v, want 1 failed", s.TaskCounts)
	}
}

// readerFrom is a server's writer with ReadFrom, as net/http's is: over
// HTTP/1 it sends a file with sendfile(2).
type readerFrom struct {
	*httptest.ResponseRecorder
	readFrom int
}

func (w *readerFrom) ReadFrom(r io.Reader) (int64, error) {
	w.readFrom++
	return io.Copy(w.ResponseRecorder, r)
}

// With WithFailureStatus, io.Copy to next's writer (as http.ServeContent
// and http.FileServer copy a file) still reaches the server's writer's
// ReadFrom, and the status is recorded: a writer without ReadFrom would
// copy through a buffer instead, never sending the file with sendfile.
func TestHandlerFailureStatusKeepsReadFrom(t *testing.T) {
	ex := newExec(t, nil)
	var statuses []int
	h := httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Only a Reader: io.Copy asks the writer for ReadFrom.
		if _, err := io.Copy(w, struct{ io.Reader }{strings.NewReader("file body")}); err != nil {
			t.Errorf("copy: %v", err)
		}
	}), httpadmit.WithFailureStatus(func(c int) bool { statuses = append(statuses, c); return c >= 500 }))
	w := &readerFrom{ResponseRecorder: httptest.NewRecorder()}
	serveWith(h, w)
	if w.readFrom != 1 || w.Body.String() != "file body" {
		t.Fatalf("the server's writer's ReadFrom ran %d times, body %q: want once, %q", w.readFrom, w.Body.String(), "file body")
	}
	if len(statuses) != 1 || statuses[0] != http.StatusOK {
		t.Fatalf("statuses judged %v, want [200]", statuses)
	}
}

// failingReader fails its first read, as an upstream body cut short does.
type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("upstream body failed") }

// A copy to next's writer that sends nothing leaves the status unwritten,
// as net/http's ReadFrom does: a status next writes after it is the one
// its client gets, and the one WithFailureStatus judges.
func TestHandlerFailureStatusAfterEmptyReadFrom(t *testing.T) {
	ex := newExec(t, nil)
	var statuses []int
	h := httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n, err := io.Copy(w, failingReader{}); n == 0 && err != nil {
			w.WriteHeader(http.StatusBadGateway)
		}
	}), httpadmit.WithFailureStatus(func(c int) bool { statuses = append(statuses, c); return c >= 500 }))
	srv := httptest.NewServer(withTenant(h))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("the client got %d, want 502", resp.StatusCode)
	}
	if len(statuses) != 1 || statuses[0] != http.StatusBadGateway {
		t.Fatalf("statuses judged %v, want [502], the status the client got", statuses)
	}
	if s, _ := ex.GroupStats("a"); s.Failed != 1 {
		t.Errorf("%+v, want 1 failed", s.TaskCounts)
	}
}

// withTenant sets the tenant header that serveWith's requests carry.
func withTenant(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("X-Tenant", "a")
		h.ServeHTTP(w, r)
	})
}

// stringWriter is a server's writer with a WriteString that does not
// allocate, as net/http's: it counts the bytes and the first status.
type stringWriter struct {
	header  http.Header
	status  int
	n       int
	strings int // WriteString calls
}

func (w *stringWriter) Header() http.Header { return w.header }

func (w *stringWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *stringWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.n += len(p)
	return len(p), nil
}

func (w *stringWriter) WriteString(s string) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.strings++
	w.n += len(s)
	return len(s), nil
}

// With WithFailureStatus, io.WriteString to next's writer reaches the
// server's writer's WriteString without copying the string to a new slice
// on each call, and a WriteString before any status is judged 200, the
// status sent: a 500 written after it is too late to be the client's.
func TestHandlerFailureStatusKeepsWriteString(t *testing.T) {
	ex := newExec(t, nil)
	var statuses []int
	var allocs float64
	h := httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.WriteString(w, "first"); err != nil {
			t.Errorf("WriteString: %v", err)
		}
		w.WriteHeader(http.StatusInternalServerError)
		allocs = testing.AllocsPerRun(100, func() { io.WriteString(w, "a line of the response\n") })
	}), httpadmit.WithFailureStatus(func(c int) bool { statuses = append(statuses, c); return c >= 500 }))
	w := &stringWriter{header: http.Header{}}
	serveWith(h, w)
	if allocs != 0 {
		t.Errorf("io.WriteString allocates %v times a call, want 0", allocs)
	}
	if w.strings == 0 {
		t.Error("the server's writer's WriteString never ran")
	}
	if w.status != http.StatusOK || len(statuses) != 1 || statuses[0] != http.StatusOK {
		t.Fatalf("the client got %d, statuses judged %v; want 200 and [200]", w.status, statuses)
	}
	if s, _ := ex.GroupStats("a"); s.Succeeded != 1 {
		t.Errorf("%+v, want 1 succeeded", s.TaskCounts)
	}
}
