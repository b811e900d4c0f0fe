package benchmarks

import "testing"

// The grouped workload: tiny tasks over 1,000 groups (task i goes to group
// i%1000), concurrency 4 per group, global limit 256, by batches of
// 100,000 (100 tasks per group per batch): submit all, then wait for all.
//
// One benchmark op is ONE TASK, as in the flat workload.

const (
	groupedGroups = 1000
	groupedConc   = 4
	groupedGlobal = 256
)

var groupedKeys = groupKeys(groupedGroups)

var groupedPeers = []peerCase{
	{"ours", func(c *counter) (runner, error) {
		return newOurs(c, groupedKeys, groupedGlobal, groupedConc, 0)
	}},
	{"ours-go", func(c *counter) (runner, error) {
		return newOursGo(c, groupedKeys, groupedGlobal, groupedConc)
	}},
	{"ours-ants", func(c *counter) (runner, error) {
		return newOurs(c, groupedKeys, groupedGlobal, groupedConc, antsSpawnFactor*groupedGlobal)
	}},
	// The hand-written version: a goroutine per task, group permit first,
	// then global (the order that does not pin global permits).
	{"xsync-group-first", func(c *counter) (runner, error) {
		return newXsync(c, groupedKeys, groupedGlobal, groupedConc, false), nil
	}},
	// The same, global permit first (the naive order).
	{"xsync-global-first", func(c *counter) (runner, error) {
		return newXsync(c, groupedKeys, groupedGlobal, groupedConc, true), nil
	}},
	// pond v2: a parent pool of 256, one subpool of 4 per group.
	{"pond", func(c *counter) (runner, error) {
		return newPond(c, groupedGlobal, groupedGroups, groupedConc, false), nil
	}},
	{"pond-go", func(c *counter) (runner, error) {
		return newPond(c, groupedGlobal, groupedGroups, groupedConc, true), nil
	}},
}

func BenchmarkGrouped(b *testing.B) {
	for _, pc := range groupedPeers {
		b.Run(pc.name, func(b *testing.B) { benchRunner(b, pc) })
	}
}

// BenchmarkGroupedWork is the grouped workload with tasks that each do ~200
// ns of work (spinTask), as BenchmarkFlatWork.
func BenchmarkGroupedWork(b *testing.B) {
	for _, pc := range groupedPeers {
		if workPeer(pc.name) {
			b.Run(pc.name, func(b *testing.B) { benchRunnerWork(b, pc, spinTask) })
		}
	}
}
