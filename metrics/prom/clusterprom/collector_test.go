package clusterprom_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/cluster/redislimit/redistest"
	"github.com/groupexec/groupexec/metrics/prom/clusterprom"
)

type fixed redislimit.Stats

func (f fixed) Stats() redislimit.Stats { return redislimit.Stats(f) }

// Every Stats field reaches its metric, with its value.
func TestEveryStatIsExported(t *testing.T) {
	s := redislimit.Stats{Mode: redislimit.ModeDown, Policy: redislimit.FailOpen, RoundTrips: 1, Acquired: 2,
		Fallbacks: 3, Rejected: 4, Refills: 5, RefillsDenied: 6, Returned: 7, Renewals: 8, LeasesLost: 9,
		TasksCancelled: 10, Outages: 11, Leases: 12, PermitsLeased: 13, PermitsInUse: 14, KeyFailed: 15}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(clusterprom.New(fixed(s), "app"))
	want := `
# HELP app_cluster_fallbacks_total Fallback permits handed out under FailOpen while Redis was unreachable.
# TYPE app_cluster_fallbacks_total counter
app_cluster_fallbacks_total 3
# HELP app_cluster_key_failed_total Tasks refused because Redis answered their key's refill with an error reply that is no outage (WRONGTYPE).
# TYPE app_cluster_key_failed_total counter
app_cluster_key_failed_total 15
# HELP app_cluster_leases Leases held now.
# TYPE app_cluster_leases gauge
app_cluster_leases 12
# HELP app_cluster_leases_lost_total Leases lost (not renewed in time, or gone from Redis); not those given back at Close.
# TYPE app_cluster_leases_lost_total counter
app_cluster_leases_lost_total 9
# HELP app_cluster_outages_total Transitions to down (three failed calls in a row).
# TYPE app_cluster_outages_total counter
app_cluster_outages_total 11
# HELP app_cluster_permits_acquired_total Permits handed to tasks from leased blocks.
# TYPE app_cluster_permits_acquired_total counter
app_cluster_permits_acquired_total 2
# HELP app_cluster_permits_in_use Leased permits held by running tasks now.
# TYPE app_cluster_permits_in_use gauge
app_cluster_permits_in_use 14
# HELP app_cluster_permits_leased Permits in the leases held now.
# TYPE app_cluster_permits_leased gauge
app_cluster_permits_leased 13
# HELP app_cluster_permits_returned_total Permits given back to Redis unused.
# TYPE app_cluster_permits_returned_total counter
app_cluster_permits_returned_total 7
# HELP app_cluster_refills_denied_total Refills Redis refused: too few permits free, or the holder at its share while others wait.
# TYPE app_cluster_refills_denied_total counter
app_cluster_refills_denied_total 6
# HELP app_cluster_refills_total Blocks of permits leased.
# TYPE app_cluster_refills_total counter
app_cluster_refills_total 5
# HELP app_cluster_rejected_total Tasks refused under FailClosed while Redis was unreachable.
# TYPE app_cluster_rejected_total counter
app_cluster_rejected_total 4
# HELP app_cluster_renewals_total Renewal rounds that renewed leases in Redis.
# TYPE app_cluster_renewals_total counter
app_cluster_renewals_total 8
# HELP app_cluster_round_trips_total Calls to Redis (a pipeline counts once).
# TYPE app_cluster_round_trips_total counter
app_cluster_round_trips_total 1
# HELP app_cluster_tasks_cancelled_total Running tasks cancelled because their lease was lost; not those cancelled by Close.
# TYPE app_cluster_tasks_cancelled_total counter
app_cluster_tasks_cancelled_total 10
# HELP app_cluster_up 1 while the holder reaches Redis (ModeUp), 0 while it is down and its failure policy applies, or once it is closed.
# TYPE app_cluster_up gauge
app_cluster_up{policy="fail-open"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

// A real Holder: up while Redis answers, then down with its fallbacks
// counted once Redis is stopped (FailOpen).
func TestHolderOutageShows(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialTimeout: 100 * time.Millisecond,
		ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond})
	defer c.Close()
	h, err := redislimit.New(c, redislimit.WithPrefix("t:"+t.Name()), redislimit.WithLeaseTTL(time.Second),
		redislimit.WithPollInterval(10*time.Millisecond), redislimit.WithOpTimeout(100*time.Millisecond),
		redislimit.WithFailurePolicy(redislimit.FailOpen))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l := h.Groups(1)
	notified := make(chan string, 16)
	if err := l.Attach(func(k string) {
		select {
		case notified <- k:
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}
	col := clusterprom.New(h, "")
	if got := testutil.ToFloat64(upOnly{col}); got != 1 {
		t.Fatalf("cluster_up = %v before any outage, want 1", got)
	}
	srv.Stop()
	// Each refused refill is a failed call; three in a row take the
	// holder down, and FailOpen then grants fallback permits.
	deadline := time.Now().Add(30 * time.Second)
	fallbacks := 0
	for h.Stats().Mode != redislimit.ModeDown || fallbacks == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no outage with a fallback within 30s: %+v", h.Stats())
		}
		p, err := l.TryAcquire("g", 1)
		if err != nil {
			t.Fatal(err)
		}
		if p != nil {
			p.Release()
			if h.Stats().Mode == redislimit.ModeDown {
				fallbacks++
			}
			continue
		}
		select {
		case <-notified:
		case <-time.After(50 * time.Millisecond):
		}
	}
	if got := testutil.ToFloat64(upOnly{col}); got != 0 {
		t.Fatalf("cluster_up = %v while down, want 0", got)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "cluster_fallbacks_total" {
			if v := mf.GetMetric()[0].GetCounter().GetValue(); v < float64(fallbacks) {
				t.Fatalf("cluster_fallbacks_total = %v, want >= %d", v, fallbacks)
			}
			return
		}
	}
	t.Fatal("no cluster_fallbacks_total")
}

// upOnly collects the cluster_up metric alone, for testutil.ToFloat64.
type upOnly struct{ c *clusterprom.Collector }

func (u upOnly) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(u, ch) }

func (u upOnly) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric, 32)
	u.c.Collect(all)
	close(all)
	for m := range all {
		if strings.Contains(m.Desc().String(), `"cluster_up"`) {
			ch <- m
		}
	}
}

// A nil Source is refused by New, as clusterotel.Observe refuses it, rather
// than at the first scrape, where every scrape of the registry would fail.
func TestNilSourcePanicsInNew(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "nil Source") {
			t.Errorf("New(nil) panicked with %v; want a panic naming the nil Source", r)
		}
	}()
	clusterprom.New(nil, "")
}

// A nil *redislimit.Holder (a holder variable never set) is a Source that
// is not nil: New refuses it too, rather than every scrape panicking on it.
func TestNilHolderPanicsInNew(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "nil Source") {
			t.Errorf("New((*Holder)(nil)) panicked with %v; want a panic naming the nil Source", r)
		}
	}()
	var h *redislimit.Holder
	clusterprom.New(h, "")
}

// A closed Holder does not read up, and the lease Close gives back (its
// task cancelled) is counted neither as lost nor as a cancelled task:
// stopping a process is not an outage or a lease lost to one.
func TestClosedHolderShows(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialTimeout: time.Second,
		ReadTimeout: time.Second, WriteTimeout: time.Second})
	defer c.Close()
	h, err := redislimit.New(c, redislimit.WithPrefix("t:"+t.Name()), redislimit.WithPollInterval(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l := h.Groups(1)
	notified := make(chan string, 1)
	if err := l.Attach(func(k string) {
		select {
		case notified <- k:
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(30 * time.Second)
	var p interface {
		Bind(context.Context, context.CancelCauseFunc) context.Context
		Release()
	}
	for p == nil {
		q, err := l.TryAcquire("g", 1)
		if err != nil {
			t.Fatal(err)
		}
		if q != nil {
			p = q
			break
		}
		select {
		case <-notified:
		case <-deadline:
			t.Fatal("no permit within 30s")
		}
	}
	cancelled := make(chan error, 1)
	p.Bind(context.Background(), func(err error) { cancelled <- err })
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-cancelled; !errors.Is(err, redislimit.ErrClosed) {
		t.Fatalf("task cancelled with %v, want ErrClosed", err)
	}
	p.Release()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(clusterprom.New(h, ""))
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP cluster_leases_lost_total Leases lost (not renewed in time, or gone from Redis); not those given back at Close.
# TYPE cluster_leases_lost_total counter
cluster_leases_lost_total 0
# HELP cluster_tasks_cancelled_total Running tasks cancelled because their lease was lost; not those cancelled by Close.
# TYPE cluster_tasks_cancelled_total counter
cluster_tasks_cancelled_total 0
# HELP cluster_up 1 while the holder reaches Redis (ModeUp), 0 while it is down and its failure policy applies, or once it is closed.
# TYPE cluster_up gauge
cluster_up{policy="fail-closed"} 0
`), "cluster_leases_lost_total", "cluster_tasks_cancelled_total", "cluster_up"); err != nil {
		t.Fatal(err)
	}
}

// The metrics follow Prometheus's naming conventions as its linter reads
// them.
func TestCollectorLint(t *testing.T) {
	problems, err := testutil.CollectAndLint(clusterprom.New(fixed(redislimit.Stats{Policy: redislimit.FailOpen}), "app"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}
