package benchmarks

import (
	"testing"
)

// The flat workload: tiny tasks (one atomic add each) in one group, global
// limit 64 (ours: WithGlobalMaxInFlight(64), WithDefaultMaxConcurrency(64),
// WithDefaultMaxInFlight(Unlimited), context.Background()). Tasks go in by
// batches of 100,000: submit all, then wait for all.
//
// One benchmark op is ONE TASK: ns/op is ns per task, B/op and allocs/op are
// per task.

const (
	flatLimit = 64
	// antsSpawnFactor sizes the ants pool behind executor.WithSpawn: the
	// executor never has more workers than running permits (plus a few
	// returning), so 4x the global limit keeps Submit from ever failing.
	antsSpawnFactor = 4
)

type peerCase struct {
	name string
	new  func(c *counter) (runner, error)
}

var flatKeys = []string{"flat"}

var flatPeers = []peerCase{
	{"ours", func(c *counter) (runner, error) { return newOurs(c, flatKeys, flatLimit, flatLimit, 0) }},
	{"ours-go", func(c *counter) (runner, error) { return newOursGo(c, flatKeys, flatLimit, flatLimit) }},
	{"ours-ants", func(c *counter) (runner, error) {
		return newOurs(c, flatKeys, flatLimit, flatLimit, antsSpawnFactor*flatLimit)
	}},
	{"ants", func(c *counter) (runner, error) { return newAnts(c, flatLimit) }},
	{"pond", func(c *counter) (runner, error) { return newPond(c, flatLimit, 0, 0, false), nil }},
	{"pond-go", func(c *counter) (runner, error) { return newPond(c, flatLimit, 0, 0, true), nil }},
	{"fixed", func(c *counter) (runner, error) { return newFixed(c, flatLimit), nil }},
	{"mutex-floor", func(c *counter) (runner, error) { return newFloor(c, flatLimit, 0), nil }},
	{"mutex-floor-burn", func(c *counter) (runner, error) { return newFloor(c, flatLimit, floorBurn), nil }},
}

// floorBurn is the loop count of mutex-floor-burn's work under the lock,
// per submit and per finish: ~80 ns per task on one core of the 2-core
// machine, the order of what an executor with one lock spends under it per
// task.
const floorBurn = 150

func BenchmarkFlat(b *testing.B) {
	for _, pc := range flatPeers {
		b.Run(pc.name, func(b *testing.B) { benchRunner(b, pc) })
	}
}

// BenchmarkFlatWork is the flat workload with tasks that each do ~200 ns of
// work (spinTask) before their add: the submitter and the workers then run
// at the same time, as they do in a service.
func BenchmarkFlatWork(b *testing.B) {
	for _, pc := range flatPeers {
		if workPeer(pc.name) {
			b.Run(pc.name, func(b *testing.B) { benchRunnerWork(b, pc, spinTask) })
		}
	}
}

// workPeer reports whether the peer named runs in the work variants: the
// floors and the ants-spawned variant measure the empty task only.
func workPeer(name string) bool {
	switch name {
	case "mutex-floor", "mutex-floor-burn", "ours-ants":
		return false
	}
	return true
}

// benchRunner runs b.N tasks through a fresh runner, by batches, and checks
// that every one ran.
func benchRunner(b *testing.B, pc peerCase) { benchRunnerWork(b, pc, 0) }

// benchRunnerWork is benchRunner with tasks that do spins rounds of work.
func benchRunnerWork(b *testing.B, pc peerCase, spins int) {
	c := counter{spins: spins}
	r, err := pc.new(&c)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for left := b.N; left > 0; {
		k := min(left, batch)
		if err := r.run(k); err != nil {
			b.Fatal(err)
		}
		left -= k
	}
	b.StopTimer()
	if o, ok := r.(*oursRunner); ok && o.spawn != nil {
		b.ReportMetric(float64(o.spawn.spawns.Load())/float64(b.N), "spawns/task")
		b.ReportMetric(float64(o.spawn.fallbacks.Load()), "spawn-fallbacks")
	}
	if err := r.close(); err != nil {
		b.Fatal(err)
	}
	if got := c.n.Load(); got != int64(b.N) {
		b.Fatalf("%s ran %d tasks, want %d", pc.name, got, b.N)
	}
}
