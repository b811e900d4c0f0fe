package loadgen

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/groupexec/groupexec/clock"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The generators' tests run on a clock.Fake, inside a synctest bubble, and
// their server is a RoundTripper whose service time is a timer on the same
// clock. drive moves the time only once every goroutine is blocked
// (synctest.Wait), that is once everything due at the present time has
// happened, so every send, arrival, answer and reading of the clock happens
// at the time the schedule says, on any machine. TestOverHTTP checks the
// same generators against a real server, asserting nothing about time.

// server answers each request after serve on clk (or, with serve < 0,
// never: it waits for the request's context). It records the fake time
// requests arrive at, their X-Tenant headers, and the most it held at once
// whenever the bubble settled (drive): answers due at the same instant are
// delivered by goroutines in any order, so that one client's next request
// may arrive before another's answer, due with it, has left.
type server struct {
	clk   *clock.Fake
	serve time.Duration

	mu       sync.Mutex
	arrivals []time.Time
	tenants  []string
	now, max int
}

func newServer(clk *clock.Fake, serve time.Duration) (*server, *http.Client) {
	s := &server{clk: clk, serve: serve}
	return s, &http.Client{Transport: s}
}

// settled records how many requests the server holds.
func (s *server) settled() {
	s.mu.Lock()
	s.max = max(s.max, s.now)
	s.mu.Unlock()
}

func (s *server) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.arrivals = append(s.arrivals, s.clk.Now())
	s.tenants = append(s.tenants, r.Header.Get("X-Tenant"))
	s.now++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.now--
		s.mu.Unlock()
	}()
	done := make(chan struct{})
	if s.serve >= 0 {
		timer := s.clk.AfterFunc(s.serve, func() { close(done) })
		defer timer.Stop()
	}
	select {
	case <-done:
	case <-r.Context().Done():
		// What many RoundTrippers return; http.Transport returns the
		// cause instead (TestOverHTTP).
		return nil, r.Context().Err()
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{},
		Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
}

// stats returns the arrival times, from start, and the most requests the
// server held at once when the bubble settled.
func (s *server) stats(start time.Time) (arrivals []time.Duration, most int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.arrivals {
		arrivals = append(arrivals, a.Sub(start))
	}
	return arrivals, s.max
}

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// every is drive's usual step: the schedules of these tests fall on whole
// milliseconds.
func every(d time.Duration) func(time.Duration) time.Duration {
	return func(time.Duration) time.Duration { return d }
}

// drive calls f in its own goroutine and, each time every goroutine of the
// bubble is blocked, has s note what it holds and moves clk on by
// step(time passed so far), until f returns; it returns the time that
// passed. A run still going after a minute of fake time fails the test and
// has its context cancelled.
func drive(t *testing.T, clk *clock.Fake, s *server, step func(time.Duration) time.Duration, f func(context.Context)) time.Duration {
	t.Helper()
	begin := clk.Now()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(ctx)
	}()
	for {
		synctest.Wait()
		s.settled()
		select {
		case <-done:
			return clk.Now().Sub(begin)
		default:
		}
		passed := clk.Now().Sub(begin)
		if passed >= time.Minute && ctx.Err() == nil {
			t.Errorf("still running %v after it began", passed)
			cancel()
			continue
		}
		clk.Advance(step(passed))
	}
}

// The generator sends at the configured rate, evenly, whatever the server's
// service time: with an 18 ms handler and 5 ms between requests, it keeps 4
// requests outstanding rather than wait for answers, and each arrives when
// it is due.
func TestOpenRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(epoch)
		s, c := newServer(clk, 18*time.Millisecond)
		const rate, d = 200, time.Second
		var res *Results
		took := drive(t, clk, s, every(time.Millisecond), func(ctx context.Context) {
			var err error
			res, err = Open(ctx, OpenConfig{Target: Target{URL: "http://backend/"}, Client: c, Rate: rate, Duration: d, Clock: clk})
			if err != nil {
				t.Error(err)
			}
		})
		sum := res.Summary()
		if sum.N != rate || sum.OK != rate {
			t.Fatalf("N %d OK %d, want %d each", sum.N, sum.OK, rate)
		}
		if !res.Start.Equal(epoch) {
			t.Errorf("run started at %v, want the clock's %v", res.Start, epoch)
		}
		arr, most := s.stats(epoch)
		if len(arr) != rate {
			t.Fatalf("server saw %d requests, want %d", len(arr), rate)
		}
		if most != 4 {
			t.Errorf("server had at most %d requests at once, want 4 (18ms each, one every 5ms)", most)
		}
		for i, a := range arr {
			if want := time.Duration(i) * 5 * time.Millisecond; a != want {
				t.Fatalf("request %d arrived at %v, want %v", i, a, want)
			}
		}
		for _, r := range res.List {
			if r.Scheduled != time.Duration(r.Seq)*5*time.Millisecond || r.Lag != 0 || r.Latency != 18*time.Millisecond {
				t.Fatalf("request %d: scheduled %v lag %v latency %v, want %v, 0 and the handler's 18ms",
					r.Seq, r.Scheduled, r.Lag, r.Latency, time.Duration(r.Seq)*5*time.Millisecond)
			}
		}
		if want := d - d/rate + 18*time.Millisecond; took != want {
			t.Errorf("took %v, want %v: the last request's due time and answer", took, want)
		}
	})
}

// A generator held up (here: its clock jumps from 12 ms to 45 ms while it
// waits for the request due at 20 ms) sends the requests that fell due
// meanwhile at once, each charged its own lag, and the ones after them at
// their own times: a late send does not push the schedule.
func TestOpenCatchesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(epoch)
		s, c := newServer(clk, time.Millisecond)
		var res *Results
		drive(t, clk, s, func(passed time.Duration) time.Duration {
			if passed == 12*time.Millisecond {
				return 33 * time.Millisecond
			}
			return time.Millisecond
		}, func(ctx context.Context) {
			var err error
			res, err = Open(ctx, OpenConfig{Target: Target{URL: "http://backend/"}, Client: c, Rate: 100, Duration: 100 * time.Millisecond, Clock: clk})
			if err != nil {
				t.Error(err)
			}
		})
		arr, _ := s.stats(epoch)
		ms := time.Millisecond
		wantArr := []time.Duration{0, 10 * ms, 45 * ms, 45 * ms, 45 * ms, 50 * ms, 60 * ms, 70 * ms, 80 * ms, 90 * ms}
		if len(arr) != len(wantArr) || len(res.List) != len(wantArr) {
			t.Fatalf("server saw %d requests, %d results; want %d", len(arr), len(res.List), len(wantArr))
		}
		for i, a := range arr {
			if a != wantArr[i] {
				t.Errorf("request %d arrived at %v, want %v (all: %v)", i, a, wantArr[i], arr)
			}
		}
		for i, r := range res.List {
			due := time.Duration(i) * 10 * ms
			if lag, lat := wantArr[i]-due, wantArr[i]+ms-due; r.Scheduled != due || r.Lag != lag || r.Latency != lat {
				t.Errorf("request %d: scheduled %v lag %v latency %v, want %v, %v, %v", i, r.Scheduled, r.Lag, r.Latency, due, lag, lat)
			}
		}
	})
}

// Open loop: a slow server does not slow the sending. 50 requests at 50/s
// against a 90 ms handler take 1.07 s, not the 4.5 s a single closed loop
// would, with 5 of them at the server at once.
func TestOpenDoesNotWaitForAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(epoch)
		s, c := newServer(clk, 90*time.Millisecond)
		var res *Results
		took := drive(t, clk, s, every(time.Millisecond), func(ctx context.Context) {
			var err error
			res, err = Open(ctx, OpenConfig{Target: Target{URL: "http://backend/"}, Client: c, Rate: 50, Duration: time.Second, Clock: clk})
			if err != nil {
				t.Error(err)
			}
		})
		if want := 980*time.Millisecond + 90*time.Millisecond; took != want {
			t.Errorf("took %v, want %v", took, want)
		}
		if _, most := s.stats(epoch); most != 5 {
			t.Errorf("at most %d requests at once, want 5", most)
		}
		if sum := res.Summary(); sum.OK != 50 || sum.Max != 90*time.Millisecond {
			t.Errorf("OK %d max latency %v, want 50 and the handler's 90ms", sum.OK, sum.Max)
		}
	})
}

// Latency runs from the scheduled time. With one request in flight at a
// time (MaxInFlight 1) and a server taking 40 ms, request i (due at 10i ms)
// can only be sent once the one before it is answered, at 40i ms, and ends
// at 40(i+1) ms: its lag is 30i ms and its latency 40+30i ms. A generator
// with coordinated omission would report 40 ms for every request.
func TestOpenLatencyFromScheduledTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(epoch)
		s, c := newServer(clk, 40*time.Millisecond)
		var res *Results
		took := drive(t, clk, s, every(time.Millisecond), func(ctx context.Context) {
			var err error
			res, err = Open(ctx, OpenConfig{Target: Target{URL: "http://backend/"}, Client: c,
				Rate: 100, Duration: 200 * time.Millisecond, MaxInFlight: 1, Clock: clk})
			if err != nil {
				t.Error(err)
			}
		})
		if len(res.List) != 20 {
			t.Fatalf("%d results, want 20", len(res.List))
		}
		if _, most := s.stats(epoch); most != 1 {
			t.Errorf("server had %d requests at once under MaxInFlight 1", most)
		}
		ms := time.Millisecond
		for i, r := range res.List {
			if r.Scheduled != time.Duration(i)*10*ms || r.Lag != time.Duration(30*i)*ms || r.Latency != time.Duration(40+30*i)*ms || !r.OK() {
				t.Errorf("request %d: scheduled %v lag %v latency %v, want %v, %v, %v",
					i, r.Scheduled, r.Lag, r.Latency, time.Duration(i)*10*ms, time.Duration(30*i)*ms, time.Duration(40+30*i)*ms)
			}
		}
		if took != 800*ms {
			t.Errorf("took %v, want 20 answers of 40ms one after another", took)
		}
		sum := res.Summary()
		if sum.P99 != 610*ms || sum.LagMax != 570*ms || sum.SentP99 != 40*ms {
			t.Errorf("p99 %v lag max %v from-send p99 %v, want 610ms, 570ms and 40ms", sum.P99, sum.LagMax, sum.SentP99)
		}
	})
}

// A run ends Timeout after its last request was due, even when the server
// never answers; the requests are recorded as timeouts, each at its own
// deadline.
func TestOpenBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(epoch)
		s, c := newServer(clk, -1)
		var res *Results
		took := drive(t, clk, s, every(time.Millisecond), func(ctx context.Context) {
			var err error
			res, err = Open(ctx, OpenConfig{Target: Target{URL: "http://backend/"}, Client: c,
				Rate: 20, Duration: 300 * time.Millisecond, Timeout: 200 * time.Millisecond, Clock: clk})
			if err != nil {
				t.Error(err)
			}
		})
		if took != 450*time.Millisecond {
			t.Errorf("took %v, want 450ms: the last request due at 250ms, plus its 200ms timeout", took)
		}
		sum := res.Summary()
		if sum.N != 6 || sum.Errors != 6 || sum.OK != 0 {
			t.Fatalf("N %d errors %d OK %d, want 6 timeouts", sum.N, sum.Errors, sum.OK)
		}
		for _, r := range res.List {
			if !IsTimeout(r.Err) {
				t.Errorf("request %d: %v, want a timeout", r.Seq, r.Err)
			}
			if r.Latency != 200*time.Millisecond {
				t.Errorf("request %d failed after %v, want at its 200ms timeout", r.Seq, r.Latency)
			}
		}
	})
}

// A request sent after its deadline (its lag above the timeout) is
// recorded as a timeout at once.
func TestOpenLateRequestTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(epoch)
		s, c := newServer(clk, 2*time.Millisecond)
		var res *Results
		// Requests due at 0 and 5 ms; the clock jumps from 4 ms to 30 ms
		// before the second one is sent, past its 20 ms timeout.
		drive(t, clk, s, func(passed time.Duration) time.Duration {
			if passed == 4*time.Millisecond {
				return 26 * time.Millisecond
			}
			return time.Millisecond
		}, func(ctx context.Context) {
			var err error
			res, err = Open(ctx, OpenConfig{Target: Target{URL: "http://backend/"}, Client: c,
				Rate: 200, Duration: 10 * time.Millisecond, Timeout: 20 * time.Millisecond, Clock: clk})
			if err != nil {
				t.Error(err)
			}
		})
		if len(res.List) != 2 {
			t.Fatalf("%d results, want 2", len(res.List))
		}
		if r := res.List[0]; !r.OK() || r.Latency != 2*time.Millisecond {
			t.Errorf("request 0: %v latency %v, want an answer at 2ms", r.Err, r.Latency)
		}
		if r := res.List[1]; !IsTimeout(r.Err) || r.Lag != 25*time.Millisecond || r.Latency != 25*time.Millisecond {
			t.Errorf("request 1: %v lag %v latency %v, want a timeout at once, 25ms late", r.Err, r.Lag, r.Latency)
		}
		if arr, _ := s.stats(epoch); len(arr) > 2 {
			t.Errorf("server saw %d requests", len(arr))
		}
	})
}

// Cancelling the context stops the run at once: nothing more is sent, and
// the requests in flight are cancelled and recorded.
func TestOpenCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(epoch)
		s, c := newServer(clk, -1)
		var res *Results
		took := drive(t, clk, s, every(time.Millisecond), func(ctx context.Context) {
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			clk.AfterFunc(190*time.Millisecond, cancel)
			var err error
			res, err = Open(ctx, OpenConfig{Target: Target{URL: "http://backend/"}, Client: c, Rate: 50, Duration: 10 * time.Second, Clock: clk})
			if err != context.Canceled {
				t.Errorf("err %v, want the context's", err)
			}
		})
		if took != 190*time.Millisecond {
			t.Errorf("took %v after a cancel at 190ms", took)
		}
		// Due at 0, 20, ..., 180 ms.
		if arr, _ := s.stats(epoch); len(res.List) != 10 || len(arr) != 10 {
			t.Fatalf("%d results, %d sent, want 10", len(res.List), len(arr))
		}
		for i, r := range res.List {
			if !errors.Is(r.Err, context.Canceled) || IsTimeout(r.Err) {
				t.Errorf("request %d: %v, want cancelled", i, r.Err)
			}
			if want := 190*time.Millisecond - time.Duration(i)*20*time.Millisecond; r.Latency != want {
				t.Errorf("request %d ended after %v, want %v: at the cancel", i, r.Latency, want)
			}
		}
	})
}

// A run whose context has already ended sends nothing, not even the
// request due at once.
func TestOpenEndedContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(epoch)
		s, c := newServer(clk, time.Millisecond)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		res, err := Open(ctx, OpenConfig{Target: Target{URL: "http://backend/"}, Client: c, Rate: 50, Duration: time.Second, Clock: clk})
		if err != context.Canceled {
			t.Errorf("err %v, want the context's", err)
		}
		if arr, _ := s.stats(epoch); len(res.List) != 0 || len(arr) != 0 {
			t.Errorf("%d results, %d sent, want none", len(res.List), len(arr))
		}
	})
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

// The closed loop keeps exactly Clients requests outstanding, sends each
// client's next request when its last is answered, and sends nothing at or
// after Duration: 4 clients against a 10 ms server for 500 ms send 50
// requests each, the last at 490 ms.
func TestClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(epoch)
		s, c := newServer(clk, 10*time.Millisecond)
		var res *Results
		took := drive(t, clk, s, every(time.Millisecond), func(ctx context.Context) {
			var err error
			res, err = Closed(ctx, ClosedConfig{Target: Target{URL: "http://backend/", Header: http.Header{"X-Tenant": {"a"}}},
				Client: c, Clients: 4, Duration: 500 * time.Millisecond, Clock: clk})
			if err != nil {
				t.Error(err)
			}
		})
		if took != 500*time.Millisecond {
			t.Errorf("took %v, want 500ms", took)
		}
		if !res.Start.Equal(epoch) {
			t.Errorf("run started at %v, want the clock's %v", res.Start, epoch)
		}
		arr, most := s.stats(epoch)
		if most != 4 {
			t.Errorf("at most %d requests at once, want 4", most)
		}
		sum := res.Summary()
		if sum.N != 200 || len(arr) != 200 || sum.OK != 200 {
			t.Errorf("N %d OK %d, server saw %d; want 200", sum.N, sum.OK, len(arr))
		}
		if sum.Throughput != 400 || sum.P50 != 10*time.Millisecond || sum.Max != 10*time.Millisecond {
			t.Errorf("throughput %v p50 %v max %v, want 400/s and 10ms", sum.Throughput, sum.P50, sum.Max)
		}
		for i, r := range res.List {
			if want := time.Duration(i/4) * 10 * time.Millisecond; r.Seq != i || r.Scheduled != want {
				t.Fatalf("result %d: seq %d sent at %v, want %v", i, r.Seq, r.Scheduled, want)
			}
		}
		for i, tenant := range s.tenants {
			if tenant != "a" {
				t.Fatalf("request %d has X-Tenant %q, want the target's a", i, tenant)
			}
		}
	})
}

func TestClosedConfigErrors(t *testing.T) {
	if _, err := Closed(context.Background(), ClosedConfig{Target: Target{URL: "http://127.0.0.1:1"}, Clients: 0, Duration: time.Second}); err == nil {
		t.Error("0 clients: no error")
	}
}

// Both generators over real HTTP: what they send and how they record it
// is checked; how long anything takes on this machine is not. Open runs
// on the system clock, with a count fixed by its configuration; Closed on
// a clock.Fake that the server moves 1 ms per answer, so that its one
// client sends exactly 10 requests in its 10 ms.
func TestOverHTTP(t *testing.T) {
	clk := clock.NewFake(epoch)
	var mu sync.Mutex
	tenants := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			<-r.Context().Done()
			return
		}
		tenant := r.Header.Get("X-Tenant")
		mu.Lock()
		tenants[tenant]++
		mu.Unlock()
		if tenant == "closed" {
			clk.Advance(time.Millisecond)
		}
		w.Write([]byte("ok"))
	}))
	tr := &http.Transport{}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.Close()
		tr.CloseIdleConnections()
	})
	c := &http.Client{Transport: tr}

	open, err := Open(context.Background(), OpenConfig{Target: Target{URL: srv.URL + "/", Header: http.Header{"X-Tenant": {"open"}}},
		Client: c, Rate: 1000, Duration: 5 * time.Millisecond, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if sum := open.Summary(); sum.N != 5 || sum.OK != 5 || sum.Codes[200] != 5 {
		t.Errorf("open: N %d OK %d codes %v, want 5 answers of 200", sum.N, sum.OK, sum.Codes)
	}
	closed, err := Closed(context.Background(), ClosedConfig{Target: Target{URL: srv.URL + "/", Header: http.Header{"X-Tenant": {"closed"}}},
		Client: c, Clients: 1, Duration: 10 * time.Millisecond, Timeout: time.Hour, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if sum := closed.Summary(); sum.N != 10 || sum.OK != 10 || sum.Max != time.Millisecond || sum.Throughput != 1000 {
		t.Errorf("closed: N %d OK %d max latency %v throughput %v, want 10 answers of 1ms, 1000/s", sum.N, sum.OK, sum.Max, sum.Throughput)
	}
	mu.Lock()
	if tenants["open"] != 5 || tenants["closed"] != 10 || len(tenants) != 2 {
		t.Errorf("server saw %v, want 5 requests of the open run and 10 of the closed one", tenants)
	}
	mu.Unlock()

	// The server never answers: http.Transport ends each request with the
	// deadline's cause, whatever the machine's speed. (The minute only
	// ends a run whose timeouts do not work, with an error of its own.)
	ctx, cancel := context.WithTimeoutCause(context.Background(), time.Minute, errors.New("the timeouts did not end the run"))
	defer cancel()
	hang, err := Open(ctx, OpenConfig{Target: Target{URL: srv.URL + "/hang"}, Client: c,
		Rate: 1000, Duration: 2 * time.Millisecond, Timeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range hang.List {
		if !IsTimeout(r.Err) || r.Latency < time.Millisecond {
			t.Errorf("request %d to a server that never answers: %v after %v, want a timeout after 1ms", r.Seq, r.Err, r.Latency)
		}
	}
	if len(hang.List) != 2 {
		t.Errorf("%d requests to /hang, want 2", len(hang.List))
	}
}
