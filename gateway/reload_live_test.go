package gateway_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/gateway"
)

// holdClock is a clock whose next Now, once armed, says so on held and
// waits for resume: the handler reads the clock once, between reading the
// config in force and taking its tenant's group, so a test can land a
// reload in between.
type holdClock struct {
	clock.Clock
	armed  atomic.Bool
	held   chan struct{}
	resume chan struct{}
}

func (c *holdClock) Now() time.Time {
	if c.armed.CompareAndSwap(true, false) {
		c.held <- struct{}{}
		<-c.resume
	}
	return c.Clock.Now()
}

// An unconfigured tenant that becomes live while a reload changes the
// defaults, from a request that read the old config, gets the new defaults
// like any tenant live during the reload: the requests it is sent after the
// reload run under them.
func TestReloadReachesTenantBecomingLiveDuringIt(t *testing.T) {
	clk := &holdClock{Clock: clock.NewFake(time.Now()), held: make(chan struct{}), resume: make(chan struct{})}
	g := newGate()
	be := backend(t, g.ServeHTTP)
	path, write := configFile(t, be.URL, "backends: [%s]\nlimits: {max_concurrency_per_group: 1}\n")
	gw := start(t, be.URL, "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nbackends: [%s]\nlimits: {max_concurrency_per_group: 1}\n",
		gateway.WithConfigFile(path), gateway.WithClock(clk))
	c := client(t)

	clk.armed.Store(true)
	first := goDo(t, c, gw.url, "t")
	select {
	case <-clk.held: // the request has read the old config, not yet taken its group
	case <-time.After(bound):
		t.Fatal("the request did not reach the clock")
	}
	write("backends: [%s]\nlimits: {max_concurrency_per_group: 3}\n")
	if err := gw.gw.ReloadFile(); err != nil {
		t.Fatal(err)
	}
	close(clk.resume)
	g.await(t, 1)

	second := goDo(t, c, gw.url, "t") // arrives after the reload
	eventually(t, "the second request to run or wait", func() bool {
		s, _ := gw.gw.Executor().GroupStats("t")
		return s.RunningTasks+s.Waiting == 2
	})
	if s, _ := gw.gw.Executor().GroupStats("t"); s.MaxConcurrency != 3 || s.RunningTasks != 2 {
		t.Errorf("tenant t after the reload: max concurrency %d, %d running, %d waiting; want the new default 3, both running",
			s.MaxConcurrency, s.RunningTasks, s.Waiting)
	}
	close(g.release)
	for _, done := range []<-chan int{first, second} {
		if code := <-done; code != 200 {
			t.Errorf("request: %d", code)
		}
	}
}

// A request that read the config before a reload removed its tenant takes
// its group under the config in force, whose limits the executor applies:
// with max_groups 0 it is an unconfigured tenant's request and waits for
// the overflow group's one place, not run in a group of its own beside it.
func TestReloadRemovedTenantCountsUnderNewConfig(t *testing.T) {
	clk := &holdClock{Clock: clock.NewFake(time.Now()), held: make(chan struct{}), resume: make(chan struct{})}
	g := newGate()
	be := backend(t, g.ServeHTTP)
	const base = "backends: [%s]\ntenant: {max_groups: 0}\n"
	path, write := configFile(t, be.URL, base+"tenants: {a: {max_concurrency: 4}}\n")
	gw := start(t, be.URL, "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\n"+base+"tenants: {a: {max_concurrency: 4}}\n",
		gateway.WithConfigFile(path), gateway.WithClock(clk))
	c := client(t)
	overflow := goDo(t, c, gw.url, "x") // takes the overflow group's one place
	g.await(t, 1)

	clk.armed.Store(true)
	stale := goDo(t, c, gw.url, "a")
	select {
	case <-clk.held: // the request has read the config naming a, not yet taken its group
	case <-time.After(bound):
		t.Fatal("the request did not reach the clock")
	}
	write(base)
	if err := gw.gw.ReloadFile(); err != nil {
		t.Fatal(err)
	}
	close(clk.resume)
	eventually(t, "the request to wait or reach the backend", func() bool {
		s, _ := gw.gw.Executor().GroupStats(gateway.OverflowGroup)
		return s.Waiting == 1 || len(g.arrived) > 0
	})
	if len(g.arrived) > 0 {
		s, _ := gw.gw.Executor().GroupStats("a")
		t.Errorf("the request of the removed tenant ran beside the overflow group's (group a: %d running)", s.RunningTasks)
	}
	close(g.release)
	for _, done := range []<-chan int{overflow, stale} {
		if code := <-done; code != 200 {
			t.Errorf("request: %d", code)
		}
	}
}

// configFile writes a config file the gateway can reload (%s is the
// backend); write replaces its body.
func configFile(t *testing.T, backend, body string) (path string, write func(string)) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "gateway.yaml")
	write = func(body string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(fmt.Sprintf("listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\n"+body, backend)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(body)
	return path, write
}
