package prom_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/metrics/prom"
)

// transitionLog records the changes of state a breaker reports.
type transitionLog struct {
	mu sync.Mutex
	n  map[[3]string]int
}

func (l *transitionLog) add(name string, from, to breaker.State) {
	l.mu.Lock()
	l.n[[3]string{name, from.String(), to.String()}]++
	l.mu.Unlock()
}

// hammer runs n Executes of fn on cb at once and waits for them.
func hammer(cb *breaker.CircuitBreaker, n int, fn func() (int, error)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			_, _ = breaker.Execute(cb, fn)
		})
	}
	close(start)
	wg.Wait()
}

// After concurrent runs that trip a breaker, half-open it on an injected
// clock and close it again, the gauges equal each breaker's State and
// Counts, and the transitions equal the changes the breaker reported.
func TestBreakersEqualTheirNumbers(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	log := transitionLog{n: make(map[[3]string]int)}
	tr := prom.NewBreakerTransitions("", log.add)
	db, err := breaker.New(breaker.Settings{Name: "db", Clock: clk, Timeout: time.Minute, MaxRequests: 2,
		OnStateChange: tr.OnStateChange, ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 3 }})
	if err != nil {
		t.Fatal(err)
	}
	cache, err := breaker.New(breaker.Settings{Name: "cache", Clock: clk, OnStateChange: tr.OnStateChange})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(prom.NewBreakers("", db, cache), tr)
	ok := func() (int, error) { return 1, nil }
	fail := func() (int, error) { return 0, errors.New("down") }

	check := func(want breaker.State) {
		t.Helper()
		if s := db.State(); s != want {
			t.Fatalf("db is %s, want %s", s, want)
		}
		for _, cb := range []*breaker.CircuitBreaker{db, cache} {
			n, l := cb.Counts(), map[string]string{"breaker": cb.Name()}
			for name, want := range map[string]uint64{"breaker_state": uint64(cb.State()), "breaker_requests": n.Requests,
				"breaker_successes": n.TotalSuccesses, "breaker_failures": n.TotalFailures,
				"breaker_consecutive_failures": n.ConsecutiveFailures} {
				if got := mustValue(t, reg, name, l); got != float64(want) {
					t.Errorf("%s{breaker=%q} = %v, want %d", name, cb.Name(), got, want)
				}
			}
		}
		log.mu.Lock()
		defer log.mu.Unlock()
		total := 0
		for k, n := range log.n {
			total += n
			got := mustValue(t, reg, "breaker_transitions_total", map[string]string{"breaker": k[0], "from": k[1], "to": k[2]})
			if got != float64(n) {
				t.Errorf("breaker_transitions_total%v = %v, the breaker reported %d", k, got, n)
			}
		}
		var counted float64
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "breaker_transitions_total" {
				for _, m := range mf.Metric {
					counted += m.GetCounter().GetValue()
				}
			}
		}
		if counted != float64(total) {
			t.Errorf("%v transitions counted, %d reported", counted, total)
		}
	}

	hammer(db, 16, ok)
	hammer(cache, 3, fail)
	hammer(cache, 8, ok)
	hammer(cache, 2, fail) // 5 failures, 2 of them consecutive
	check(breaker.StateClosed)
	hammer(db, 16, fail) // trips on the 3rd; the rest are refused or fail on
	check(breaker.StateOpen)
	clk.Advance(time.Minute)
	done, err := db.Allow() // the first probe half-opens it, and is held
	if err != nil {
		t.Fatal(err)
	}
	check(breaker.StateHalfOpen)
	done2, err := db.Allow() // the second probe, held too
	if err != nil {
		t.Fatal(err)
	}
	hammer(db, 16, ok) // refused: both probe slots are taken
	check(breaker.StateHalfOpen)
	done(true)
	done2(true) // the second probe success closes it
	check(breaker.StateClosed)
	if n := len(log.n); n != 3 {
		t.Errorf("%d kinds of transitions, want 3: %v", n, log.n)
	}
}

// A name no label value may hold, or too long to keep, is counted under
// OtherGroup; next gets the name unchanged.
func TestBreakerTransitionsBoundNames(t *testing.T) {
	var names []string
	tr := prom.NewBreakerTransitions("app", func(name string, _, _ breaker.State) { names = append(names, name) })
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(tr)
	long := strings.Repeat("k", prom.MaxGroupLen+1)
	for _, name := range []string{"\xff", long, "ok"} {
		tr.OnStateChange(name, breaker.StateClosed, breaker.StateOpen)
	}
	if got := mustValue(t, reg, "app_breaker_transitions_total", map[string]string{"breaker": prom.OtherGroup, "from": "closed", "to": "open"}); got != 2 {
		t.Errorf("%v transitions under %s, want 2", got, prom.OtherGroup)
	}
	if got := mustValue(t, reg, "app_breaker_transitions_total", map[string]string{"breaker": "ok", "from": "closed", "to": "open"}); got != 1 {
		t.Errorf("%v transitions of ok, want 1", got)
	}
	if len(names) != 3 || names[0] != "\xff" || names[1] != long {
		t.Errorf("next got %q", names)
	}
}

func TestNewBreakersRefuses(t *testing.T) {
	a, _ := breaker.New(breaker.Settings{Name: "a"})
	a2, _ := breaker.New(breaker.Settings{Name: "a"})
	bad, _ := breaker.New(breaker.Settings{Name: "\xff"})
	for name, cbs := range map[string][]*breaker.CircuitBreaker{"nil": {a, nil}, "same name": {a, a2}, "not UTF-8": {bad}} {
		func() {
			defer func() {
				if r := recover(); r == nil {
					t.Errorf("%s: NewBreakers did not panic", name)
				}
			}()
			prom.NewBreakers("", cbs...)
		}()
	}
}
