package httpadmit_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/policy"
)

// weightParam reads a request's weight from its w query parameter.
var weightParam = httpadmit.WithWeightFunc(func(r *http.Request) (int, error) {
	return strconv.Atoi(r.URL.Query().Get("w"))
})

// A request takes its weight at the group's limits: under a concurrency of
// 4, two requests of weight 2 run in next at once and the next ones wait,
// counted inside next. (synctest.Wait returns once every request is either
// in next or waiting in its queue.)
func TestHandlerWeights(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4)})
		g := newGate(t)
		// permits counts the weights of the requests inside next.
		var permits, most atomic.Int64
		counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n, _ := strconv.Atoi(r.URL.Query().Get("w"))
			p := permits.Add(int64(n))
			for m := most.Load(); p > m && !most.CompareAndSwap(m, p); m = most.Load() {
			}
			defer permits.Add(-int64(n))
			g.ServeHTTP(w, r)
		})
		h := httpadmit.Handler(ex, counted, weightParam)
		var wg sync.WaitGroup
		codes := make(chan int, 4)
		for _, w := range []string{"2", "2", "2", "1"} {
			wg.Go(func() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/?w="+w, nil))
				codes <- rec.Code
			})
			synctest.Wait()
		}
		// Four permits run; the third heavy request waits, and the light
		// one behind it.
		s, _ := ex.GroupStats(httpadmit.DefaultGroup)
		if n, p := g.running.Load(), permits.Load(); n != 2 || p != 4 || s.Running != 4 || s.RunningTasks != 2 || s.Waiting != 2 {
			t.Errorf("%d requests of %d permits in next; stats %d permits, %d tasks running, %d waiting; want 2, 4, 4, 2, 2",
				n, p, s.Running, s.RunningTasks, s.Waiting)
		}
		g.release()
		wg.Wait()
		close(codes)
		for code := range codes {
			if code != http.StatusOK {
				t.Errorf("status %d, want 200", code)
			}
		}
		if m := most.Load(); m != 4 {
			t.Errorf("at most %d permits in next at once, want 4", m)
		}
		if s, _ := ex.GroupStats(httpadmit.DefaultGroup); s.ServedPermits != 7 {
			t.Errorf("served %d permits, want 7", s.ServedPermits)
		}
	})
}

// The weight rule: 0 means 1; an error or a negative weight is 400 and
// never reaches the executor; a weight above a limit is 413 without
// Retry-After, and next never runs.
func TestHandlerInvalidWeights(t *testing.T) {
	for _, tc := range []struct {
		w      string
		code   int
		weight int // the weight the executor saw, 0 when it saw nothing
	}{
		{"1", http.StatusOK, 1},
		{"0", http.StatusOK, 1},
		{"3", http.StatusOK, 3},
		{"-1", http.StatusBadRequest, 0},
		{"x", http.StatusBadRequest, 0},
		{"4", http.StatusRequestEntityTooLarge, 4},
	} {
		t.Run(tc.w, func(t *testing.T) {
			ev := newEvents()
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(3)}, ev.listener())
			served := 0
			var refused error
			h := httpadmit.Handler(ex, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }), weightParam,
				httpadmit.WithRefusalWriter(func(w http.ResponseWriter, r *http.Request, err error) {
					refused = err
					w.WriteHeader(httpadmit.RefusalStatus(err))
				}))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/?w="+tc.w, nil))
			if w.Code != tc.code {
				t.Fatalf("status %d, want %d (%v)", w.Code, tc.code, refused)
			}
			if tc.code == http.StatusOK {
				if served != 1 {
					t.Fatalf("next served %d", served)
				}
				if e := next(t, ev.started); e.Weight != tc.weight {
					t.Errorf("ran with weight %d, want %d", e.Weight, tc.weight)
				}
				return
			}
			if served != 0 {
				t.Errorf("next served a refused request")
			}
			if tc.weight == 0 {
				if !errors.Is(refused, httpadmit.ErrInvalidWeight) {
					t.Errorf("error %v, want ErrInvalidWeight", refused)
				}
				if s := ex.Stats(); s.Submitted != 0 || s.Rejected != 0 {
					t.Errorf("an invalid weight reached the executor: %+v", s.TaskCounts)
				}
				return
			}
			if !errors.Is(refused, executor.ErrTooHeavy) {
				t.Errorf("error %v, want ErrTooHeavy", refused)
			}
		})
	}
}

// The default writer's answers to invalid and too heavy weights.
func TestHandlerWeightAnswers(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(2)})
	srv := serve(t, httpadmit.Handler(ex, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), weightParam))
	for _, tc := range []struct {
		w, body string
		code    int
	}{
		{"-2", "invalid weight", http.StatusBadRequest},
		{"3", "the weight 3 exceeds the group in-flight limit (2)", http.StatusRequestEntityTooLarge},
	} {
		code, ra, body := mustGet(t, srv.URL+"?w="+tc.w, "a")
		if code != tc.code || ra != "" || !strings.Contains(body, tc.body) {
			t.Errorf("w=%s: %d Retry-After %q %q; want %d without Retry-After, %q", tc.w, code, ra, body, tc.code, tc.body)
		}
	}
}

// Transport: a request holds its weight in its destination's group until
// its body is closed; an invalid weight is never sent.
func TestTransportWeights(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(3), policy.WithDefaultMaxInFlight(3)})
	var sent sync.Map
	backend := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Store(r.URL.RawQuery, true)
		io.WriteString(w, "ok")
	}))
	client := &http.Client{Transport: httpadmit.Transport(ex, nil, weightParam)}
	group := strings.TrimPrefix(backend.URL, "http://")
	getW := func(w string) (*http.Response, error) {
		return client.Get(backend.URL + "?w=" + w)
	}

	resp, err := getW("2")
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := ex.GroupStats(group); s.Running != 2 || s.RunningTasks != 1 {
		t.Fatalf("%d permits, %d tasks running; want 2 and 1 while the body is open", s.Running, s.RunningTasks)
	}
	// One permit is left: a request of weight 2 is refused at once.
	if _, err := getW("2"); !errors.Is(err, executor.ErrRejected) {
		t.Errorf("second heavy request: %v, want ErrRejected", err)
	}
	resp.Body.Close()
	if s, _ := ex.GroupStats(group); s.Running != 0 {
		t.Errorf("%d permits running after Close", s.Running)
	}
	for _, w := range []string{"-1", "x"} {
		if _, err := getW(w); !errors.Is(err, httpadmit.ErrInvalidWeight) {
			t.Errorf("w=%s: %v, want ErrInvalidWeight", w, err)
		}
		if _, ok := sent.Load("w=" + w); ok {
			t.Errorf("w=%s: an invalid request was sent", w)
		}
	}
	if _, err := getW("4"); !errors.Is(err, executor.ErrTooHeavy) {
		t.Errorf("w=4: %v, want ErrTooHeavy", err)
	}
	if _, ok := sent.Load("w=4"); ok {
		t.Error("a request too heavy to run was sent")
	}
	if s, _ := ex.GroupStats(group); s.Succeeded != 1 {
		t.Errorf("%d succeeded, want 1", s.Succeeded)
	}
}
