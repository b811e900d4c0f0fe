package gateway_test

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/groupexec/groupexec/gateway"
)

// A client whose body stalls holds no place among the tracked groups: its
// tenant takes one only once the body is in. With max_groups 1, another new
// tenant gets a group of its own meanwhile, not the overflow group.
func TestStalledBodyHoldsNoPlace(t *testing.T) {
	g, gw := gated(t, minimal+"tenant: {max_groups: 1}\n")
	c := dialRaw(t, gw.url)
	c.SetDeadline(time.Now().Add(bound))
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nX-Tenant: stalled\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
	// The server sends 100 Continue at the gateway's first read of the
	// body: the request is past its rate limit and being received, and its
	// body never comes.
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != http.StatusContinue {
		t.Fatalf("no 100 Continue: %v %v", resp, err)
	}
	if n := gw.gw.LiveTenants(); n != 0 {
		t.Errorf("%d tenants live while the only request's body stalls, want 0", n)
	}
	done := goDo(t, client(t), gw.url, "other")
	g.await(t, 1)
	if s, _ := gw.gw.Executor().GroupStats("other"); s.RunningTasks != 1 {
		ov, _ := gw.gw.Executor().GroupStats(gateway.OverflowGroup)
		t.Errorf("a new tenant beside a stalled body runs %d in its own group and %d in %s, want 1 and 0",
			s.RunningTasks, ov.RunningTasks, gateway.OverflowGroup)
	}
	g.release <- struct{}{}
	if code := <-done; code != http.StatusOK {
		t.Errorf("other: %d", code)
	}
}

// stalledWriter is the writer of a client that reads its answer slowly: at
// the answer's first byte (its status) it says so, and takes nothing more
// until let go.
type stalledWriter struct {
	hdr     http.Header
	once    sync.Once
	started chan struct{}
	letGo   chan struct{}
}

func (w *stalledWriter) Header() http.Header { return w.hdr }

func (w *stalledWriter) WriteHeader(int) { w.stall() }

func (w *stalledWriter) Write(p []byte) (int, error) {
	w.stall()
	return len(p), nil
}

func (w *stalledWriter) stall() {
	w.once.Do(func() {
		close(w.started)
		<-w.letGo
	})
}

// A client that reads its answer slowly holds no place among the tracked
// groups once the backend has answered: the kept answer goes to it after
// the place is given back. With max_groups 1, another new tenant gets a
// group of its own while the answer waits for the client.
func TestSlowReaderHoldsNoPlace(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "answer") })
	gw := start(t, be.URL, minimal+"tenant: {max_groups: 1}\n")
	w := &stalledWriter{hdr: make(http.Header), started: make(chan struct{}), letGo: make(chan struct{})}
	r := httptest.NewRequest(http.MethodGet, gw.url, nil)
	r.Header.Set("X-Tenant", "reader")
	served := make(chan struct{})
	go func() {
		defer close(served)
		gw.gw.ServeHTTP(w, r)
	}()
	select {
	case <-w.started:
	case <-time.After(bound):
		t.Fatal("the answer did not start")
	}
	if n := gw.gw.LiveTenants(); n != 0 {
		t.Errorf("%d tenants live while the only answer waits for its client, want 0", n)
	}
	if grp := gw.gw.Group("other"); grp != "other" {
		t.Errorf("a new tenant beside a slow reader runs in %q, want its own group", grp)
	}
	close(w.letGo)
	<-served
}

// A request refused before its tenant takes a place (here by its rate
// limit) names the tenant it was read as, and is counted as such (an
// unconfigured tenant under _other): not as the overflow group, whose
// capacity it never took, though max_groups others are live.
func TestRefusalBeforeThePlaceNamesTheTenant(t *testing.T) {
	g, gw := gated(t, minimal+"tenant: {max_groups: 1}\nrate_limit: {rps: 1e-9, burst: 1}\n")
	c := client(t)
	done := goDo(t, c, gw.url, "holder")
	g.await(t, 1)
	if n := gw.gw.LiveTenants(); n != 1 {
		t.Fatalf("%d tenants live, want 1", n)
	}
	// The newcomer's first request spends its burst in the overflow group
	// (the gate holds it too); its second is refused by the rate limit.
	first := goDo(t, c, gw.url, "newcomer")
	g.await(t, 1)
	resp, body := do(t, c, http.MethodGet, gw.url, "newcomer", nil)
	if code, _, tenant := refusal(t, body); resp.StatusCode != http.StatusTooManyRequests || code != "rate_limited" || tenant != "newcomer" {
		t.Errorf("rate-limited newcomer: %d %q for %q, want 429 rate_limited for %q", resp.StatusCode, code, tenant, "newcomer")
	}
	// Counted once the handler returns, which may be after the client has
	// its answer.
	counted := func(group string) float64 {
		return metric(t, gw.gw.Metrics(), requestsTotal, "tenant", group, "code", "429")
	}
	eventually(t, "the refusal to be counted", func() bool { return counted("_other")+counted(gateway.OverflowGroup) == 1 })
	if n := counted(gateway.OverflowGroup); n != 0 {
		t.Errorf("the refusal is counted under %s", gateway.OverflowGroup)
	}
	close(g.release)
	for _, ch := range []<-chan int{done, first} {
		if code := <-ch; code != http.StatusOK {
			t.Errorf("held request: %d", code)
		}
	}
}

// Group is a lookup. After a reload that changed the unconfigured tenants'
// limits, asking for a new tenant's group neither gives the executor the
// tenant's limits nor drops them, and takes no place among the tracked
// groups; its answer is still the group a request would run in: the tenant's
// own while there is room, the overflow group once max_groups others are
// live. A request of a new tenant does give it the limits as it becomes
// live, and drops them as it leaves.
func TestGroupIsALookup(t *testing.T) {
	g := newGate()
	be := backend(t, g.ServeHTTP)
	built := build(t, be.URL, minimal+"tenant: {max_groups: 1}\n")
	var mu sync.Mutex
	var touched []string
	gateway.OnTenantLimits(built, func(tenant string) {
		mu.Lock()
		defer mu.Unlock()
		touched = append(touched, tenant)
	})
	touchedNow := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(touched)
	}
	r := serve(t, built)
	cfg := *r.gw.Config()
	inFlight := 7
	cfg.Limits.MaxInFlightPerGroup = &inFlight
	if err := r.gw.Reload(&cfg); err != nil {
		t.Fatal(err)
	}
	if grp := r.gw.Group("newcomer"); grp != "newcomer" {
		t.Errorf("Group(newcomer) = %q with no tenant live, want its own group", grp)
	}
	if n := r.gw.LiveTenants(); n != 0 {
		t.Errorf("%d tenants live after Group, want 0", n)
	}
	if got := touchedNow(); len(got) != 0 {
		t.Errorf("Group touched the executor's limits of %q", got)
	}
	done := goDo(t, client(t), r.url, "holder")
	g.await(t, 1)
	if grp := r.gw.Group("holder"); grp != "holder" {
		t.Errorf("Group(holder) = %q while it is live, want its own group", grp)
	}
	if grp := r.gw.Group("newcomer"); grp != gateway.OverflowGroup {
		t.Errorf("Group(newcomer) = %q while max_groups others are live, want %q", grp, gateway.OverflowGroup)
	}
	if got := touchedNow(); !slices.Equal(got, []string{"holder"}) {
		t.Errorf("limits touched for %q while holder is live, want holder's only", got)
	}
	close(g.release)
	if code := <-done; code != http.StatusOK {
		t.Errorf("holder: %d", code)
	}
	eventually(t, "holder to leave", func() bool { return r.gw.LiveTenants() == 0 })
	if got := touchedNow(); !slices.Equal(got, []string{"holder", "holder"}) {
		t.Errorf("limits touched for %q, want holder's given and dropped", got)
	}
}
