package loadgen

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server is an httptest server whose handler waits serve before answering
// (or, with serve < 0, until the request is cancelled). It records when
// requests arrive and the most it had at once.
type server struct {
	*httptest.Server
	serial bool // one request at a time, as a server of capacity 1

	mu       sync.Mutex
	arrivals []time.Time
	now, max int
	one      sync.Mutex
}

func newServer(t *testing.T, serve time.Duration, serial bool) (*server, *http.Client) {
	s := &server{serial: serial}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.arrivals = append(s.arrivals, time.Now())
		s.now++
		s.max = max(s.max, s.now)
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.now--
			s.mu.Unlock()
		}()
		if s.serial {
			s.one.Lock()
			defer s.one.Unlock()
		}
		if serve < 0 {
			<-r.Context().Done()
			return
		}
		time.Sleep(serve)
		w.Write([]byte("ok"))
	}))
	tr := &http.Transport{MaxIdleConnsPerHost: 1000}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		s.Close()
		tr.CloseIdleConnections()
	})
	return s, &http.Client{Transport: tr}
}

func (s *server) stats() (arrivals []time.Time, most int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.arrivals...), s.max
}

// The generator sends at the configured rate, evenly, whatever the server's
// service time: with a 20 ms handler and 5 ms between requests, it must keep
// about 4 requests outstanding rather than wait for answers.
//
// The spacing is judged only on a run the generator kept to its schedule: a
// process held up for a while (a loaded machine, a CPU quota) sends the
// requests that fell due meanwhile at once, as it should, and reports them
// late (Lag), and their arrivals bunch. Such a run is done again; a
// generator that is late run after run fails.
func TestOpenRate(t *testing.T) {
	const attempts = 5
	for i := 1; ; i++ {
		lag := openRate(t)
		if lag <= maxPacingLag || t.Failed() {
			return
		}
		if i == attempts {
			t.Fatalf("the generator sent up to %v late in each of %d runs", lag, attempts)
		}
		t.Logf("run %d: the generator sent up to %v late; running again", i, lag)
	}
}

// maxPacingLag is the most a send of a run whose spacing is judged may lag:
// it moves at most 10 requests across a quarter's end, within the slack of
// a quarter of TestOpenRate's run (15 requests, 75 ms). A loaded machine
// running -race delays sends by some tens of milliseconds now and then.
const maxPacingLag = 50 * time.Millisecond

// openRate runs TestOpenRate once and returns how late the generator sent at
// worst. The spacing is checked only if that is at most maxPacingLag; the
// rest always.
func openRate(t *testing.T) (maxLag time.Duration) {
	t.Helper()
	s, c := newServer(t, 20*time.Millisecond, false)
	const rate, d = 200, time.Second
	res, err := Open(context.Background(), OpenConfig{Target: Target{URL: s.URL}, Client: c, Rate: rate, Duration: d})
	if err != nil {
		t.Fatal(err)
	}
	sum := res.Summary()
	if sum.N != rate || sum.OK != rate {
		t.Fatalf("N %d OK %d, want %d each", sum.N, sum.OK, rate)
	}
	arr, most := s.stats()
	if len(arr) != rate {
		t.Fatalf("server saw %d requests, want %d", len(arr), rate)
	}
	if most < 2 {
		t.Errorf("server had at most %d requests at once: the generator waited for answers", most)
	}
	for _, r := range res.List {
		if r.Latency < 20*time.Millisecond {
			t.Fatalf("request %d latency %v, shorter than the handler's 20ms", r.Seq, r.Latency)
		}
		maxLag = max(maxLag, r.Lag)
	}
	if maxLag > maxPacingLag {
		return maxLag
	}
	// Even spacing: each quarter second of the schedule gets a quarter of
	// the requests (with slack for a busy CI machine).
	quarter := make([]int, 4)
	for _, a := range arr {
		if q := int(a.Sub(res.Start) / (d / 4)); q >= 0 && q < 4 {
			quarter[q]++
		}
	}
	for i, n := range quarter {
		if n < rate/4*7/10 || n > rate/4*13/10 {
			t.Errorf("quarter %d got %d requests, want about %d (all: %v)", i, n, rate/4, quarter)
		}
	}
	if span := arr[len(arr)-1].Sub(arr[0]); span < 900*time.Millisecond || span > 1200*time.Millisecond {
		t.Errorf("first to last arrival %v, want about %v", span, d-d/rate)
	}
	return maxLag
}

// Open loop: a slow server does not slow the sending. 50 requests at 50/s
// against a 100 ms handler take about a second, not the 5 s a single closed
// loop would.
func TestOpenDoesNotWaitForAnswers(t *testing.T) {
	s, c := newServer(t, 100*time.Millisecond, false)
	begin := time.Now()
	res, err := Open(context.Background(), OpenConfig{Target: Target{URL: s.URL}, Client: c, Rate: 50, Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took > 2*time.Second {
		t.Errorf("took %v, want about 1.1s", took)
	}
	if _, most := s.stats(); most < 4 {
		t.Errorf("at most %d requests at once, want about 5", most)
	}
	if sum := res.Summary(); sum.OK != 50 {
		t.Errorf("OK %d, want 50", sum.OK)
	}
}

// Latency runs from the scheduled time. With one request in flight at a
// time and a server taking 40 ms, request i (due at 10i ms) can only be
// sent once the one before it is answered, near 40i ms, and ends near
// 40(i+1) ms: its latency is about 40+30i ms. A generator with coordinated
// omission would report about 40 ms for every request.
func TestOpenLatencyFromScheduledTime(t *testing.T) {
	s, c := newServer(t, 40*time.Millisecond, true)
	res, err := Open(context.Background(), OpenConfig{Target: Target{URL: s.URL}, Client: c,
		Rate: 100, Duration: 200 * time.Millisecond, MaxInFlight: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.List) != 20 {
		t.Fatalf("%d results, want 20", len(res.List))
	}
	first, last := res.List[0], res.List[19]
	if first.Latency > 300*time.Millisecond {
		t.Errorf("first latency %v, want about 40ms", first.Latency)
	}
	if last.Scheduled != 190*time.Millisecond {
		t.Errorf("last scheduled at %v, want 190ms", last.Scheduled)
	}
	// 40+30*19 = 610 ms; at least 40*20 - 190 = 610 ms on any machine.
	if last.Latency < 600*time.Millisecond {
		t.Errorf("last latency %v, want at least 600ms (about 40+30*19 ms)", last.Latency)
	}
	if last.Lag < 500*time.Millisecond {
		t.Errorf("last lag %v, want about 570ms", last.Lag)
	}
	if p99 := res.Summary().P99; p99 != last.Latency && p99 < 550*time.Millisecond {
		t.Errorf("p99 %v: the delayed requests are missing from it", p99)
	}
}

// A run ends at most Timeout after its last request was due, even when the
// server never answers; the requests are recorded as timeouts.
func TestOpenBounded(t *testing.T) {
	s, c := newServer(t, -1, false)
	begin := time.Now()
	res, err := Open(context.Background(), OpenConfig{Target: Target{URL: s.URL}, Client: c,
		Rate: 20, Duration: 300 * time.Millisecond, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took > 1500*time.Millisecond {
		t.Errorf("took %v, want about 500ms", took)
	}
	sum := res.Summary()
	if sum.N != 6 || sum.Errors != 6 || sum.OK != 0 {
		t.Fatalf("N %d errors %d OK %d, want 6 timeouts", sum.N, sum.Errors, sum.OK)
	}
	for _, r := range res.List {
		if !IsTimeout(r.Err) {
			t.Errorf("request %d: %v, want a timeout", r.Seq, r.Err)
		}
		if r.Latency < 200*time.Millisecond {
			t.Errorf("request %d failed after %v, before its 200ms timeout", r.Seq, r.Latency)
		}
	}
}

// Cancelling the context stops the run at once: nothing more is sent, and
// the requests in flight are cancelled and recorded.
func TestOpenCancel(t *testing.T) {
	s, c := newServer(t, -1, false)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	begin := time.Now()
	res, err := Open(ctx, OpenConfig{Target: Target{URL: s.URL}, Client: c, Rate: 50, Duration: 10 * time.Second})
	if err != context.DeadlineExceeded {
		t.Errorf("err %v, want the context's", err)
	}
	if took := time.Since(begin); took > time.Second {
		t.Errorf("took %v after a cancel at 200ms", took)
	}
	if n := len(res.List); n < 5 || n > 15 {
		t.Errorf("%d results, want about 10", n)
	}
	for _, r := range res.List {
		if r.Err == nil {
			t.Errorf("request %d has no error", r.Seq)
		}
	}
}

func TestOpenConfigErrors(t *testing.T) {
	for _, cfg := range []OpenConfig{
		{Target: Target{URL: "http://127.0.0.1:1"}, Rate: 0, Duration: time.Second},
		{Target: Target{URL: "http://127.0.0.1:1"}, Rate: 1, Duration: 0},
		{Target: Target{URL: "http://127.0.0.1:1", Method: "BAD METHOD"}, Rate: 1, Duration: time.Second},
	} {
		if _, err := Open(context.Background(), cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}

// The closed loop keeps exactly Clients requests outstanding and stops
// sending at Duration.
func TestClosed(t *testing.T) {
	s, c := newServer(t, 10*time.Millisecond, false)
	begin := time.Now()
	res, err := Closed(context.Background(), ClosedConfig{Target: Target{URL: s.URL, Header: http.Header{"X-Tenant": {"a"}}},
		Client: c, Clients: 4, Duration: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took > 1500*time.Millisecond {
		t.Errorf("took %v, want about 510ms", took)
	}
	arr, most := s.stats()
	if most != 4 {
		t.Errorf("at most %d requests at once, want 4", most)
	}
	sum := res.Summary()
	if sum.N != len(arr) || sum.OK != sum.N {
		t.Errorf("N %d OK %d, server saw %d", sum.N, sum.OK, len(arr))
	}
	// 4 clients x 500ms / (10ms + overhead): at most 200.
	if sum.N < 60 || sum.N > 204 {
		t.Errorf("N %d, want at most 4*50", sum.N)
	}
	if sum.Throughput != float64(sum.OK)/0.5 {
		t.Errorf("throughput %v, want OK/0.5s", sum.Throughput)
	}
	for i, r := range res.List {
		if r.Seq != i || (i > 0 && r.Scheduled < res.List[i-1].Scheduled) {
			t.Fatalf("results not in send order at %d", i)
		}
		if r.Scheduled >= 500*time.Millisecond {
			t.Fatalf("request sent at %v, after the run's 500ms", r.Scheduled)
		}
	}
}

func TestClosedConfigErrors(t *testing.T) {
	if _, err := Closed(context.Background(), ClosedConfig{Target: Target{URL: "http://127.0.0.1:1"}, Clients: 0, Duration: time.Second}); err == nil {
		t.Error("0 clients: no error")
	}
}
