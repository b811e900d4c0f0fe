package executor

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// checkIndex checks that x finds exactly what want holds, for every key in
// keys, counts its groups and slots right, and keeps room for probes to end.
func checkIndex(x *groupIndex, want map[string]*group, keys []string) error {
	t := x.table.Load()
	if n := len(t.slots); n&(n-1) != 0 || 2*t.used > n {
		return fmt.Errorf("index of %d slots, %d used: not a power of two, or over half full", n, t.used)
	}
	used, live := 0, 0
	for i := range t.slots {
		switch t.slots[i].Load() {
		case nil:
		case tombstone:
			used++
		default:
			used++
			live++
		}
	}
	if used != t.used {
		return fmt.Errorf("index counts %d used slots, has %d", t.used, used)
	}
	if live != len(want) || x.n.Load() != int64(len(want)) {
		return fmt.Errorf("index holds %d groups and counts %d, want %d", live, x.n.Load(), len(want))
	}
	for _, k := range keys {
		if got := x.load(k); got != want[k] {
			return fmt.Errorf("index finds %p for %q, want %p", got, k, want[k])
		}
	}
	seen := 0
	var err error
	x.each(func(g *group) bool {
		if want[g.key] != g {
			err = fmt.Errorf("each visits %p for %q, want %p", g, g.key, want[g.key])
			return false
		}
		seen++
		return true
	})
	if err == nil && seen != len(want) {
		err = fmt.Errorf("each visits %d groups, want %d", seen, len(want))
	}
	return err
}

func TestIndexFindsWhatItHolds(t *testing.T) {
	var x groupIndex
	want := map[string]*group{}
	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([]string, 2000)
	for i := range keys {
		keys[i] = fmt.Sprintf("tenant-%d", i)
	}
	rebuilt := 0
	for op := range 50_000 {
		k := keys[rng.IntN(len(keys))]
		before := x.table.Load()
		if g := want[k]; g != nil && rng.IntN(2) == 0 {
			delete(want, k)
			x.remove(g)
		} else if g == nil {
			g = &group{key: k}
			if got, loaded := x.loadOrStore(g); loaded || got != g {
				t.Fatalf("op %d: loadOrStore of a new group for %q returned %p, loaded %v", op, k, got, loaded)
			}
			want[k] = g
		} else if got, loaded := x.loadOrStore(&group{key: k}); !loaded || got != g {
			t.Fatalf("op %d: loadOrStore of a held key %q returned %p, loaded %v, want %p", op, k, got, loaded, g)
		}
		if x.table.Load() != before {
			rebuilt++
		}
		if got := x.load(k); got != want[k] {
			t.Fatalf("op %d: index finds %p for %q, want %p", op, got, k, want[k])
		}
		if op%997 == 0 {
			if err := checkIndex(&x, want, keys); err != nil {
				t.Fatalf("op %d: %v", op, err)
			}
		}
	}
	if err := checkIndex(&x, want, keys); err != nil {
		t.Fatal(err)
	}
	if rebuilt < 5 {
		t.Fatalf("the index was rebuilt %d times: the test did not exercise rebuilds", rebuilt)
	}
	for k, g := range want {
		delete(want, k)
		x.remove(g)
	}
	if err := checkIndex(&x, want, keys); err != nil {
		t.Fatal(err)
	}
	if n := len(x.table.Load().slots); n != minIndexSlots {
		t.Fatalf("index of %d slots with no group left, want %d", n, minIndexSlots)
	}
}

// A burst of groups, dropped, does not leave its table behind, and the
// table keeps finding the groups that stay while it shrinks.
func TestIndexShrinks(t *testing.T) {
	var x groupIndex
	want := map[string]*group{}
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("burst-%d", i)
		want[keys[i]], _ = x.loadOrStore(&group{key: keys[i]})
	}
	peak := len(x.table.Load().slots)
	if peak < 4*len(keys) {
		t.Fatalf("index of %d slots for %d groups, want at least 4 slots a group", peak, len(keys))
	}
	for _, k := range keys[10:] {
		x.remove(want[k])
		delete(want, k)
	}
	if err := checkIndex(&x, want, keys); err != nil {
		t.Fatal(err)
	}
	if n := len(x.table.Load().slots); n >= peak/16 {
		t.Fatalf("index of %d slots for %d groups after the burst (peak %d): not shrunk", n, len(want), peak)
	}
}

// Readers that take no lock find every group that stays in the index while
// writers add and drop others, rebuilding the table under them, and never
// find a key's group under another key.
func TestIndexReadersDuringWrites(t *testing.T) {
	var x groupIndex
	stay := make([]*group, 64)
	for i := range stay {
		stay[i], _ = x.loadOrStore(&group{key: fmt.Sprintf("stay-%d", i)})
	}
	var stop atomic.Bool
	var readers, writers sync.WaitGroup
	errs := make(chan error, 8)
	for r := range 4 {
		readers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 9))
			for n := 0; !stop.Load() || n < 1000; n++ {
				g := stay[rng.IntN(len(stay))]
				if got := x.load(g.key); got != g {
					errs <- fmt.Errorf("reader finds %p for %q, want %p", got, g.key, g)
					return
				}
				k := fmt.Sprintf("churn-%d", rng.IntN(500))
				if got := x.load(k); got != nil && got.key != k {
					errs <- fmt.Errorf("reader finds %q's group for %q", got.key, k)
					return
				}
			}
		})
	}
	for w := range 2 {
		writers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range 20_000 {
				k := fmt.Sprintf("churn-%d", rng.IntN(500))
				if g := x.load(k); g != nil {
					x.remove(g)
				} else {
					x.loadOrStore(&group{key: k})
				}
			}
		})
	}
	writers.Wait()
	stop.Store(true)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestIndexNeverFindsATombstone: a lookup of the empty key, which no
// admission makes but GroupStats, EvictGroup and ShutdownGroup may, does
// not return the tombstone of a group dropped at the start of its probe
// chain.
func TestIndexNeverFindsATombstone(t *testing.T) {
	var x groupIndex
	x.loadOrStore(&group{key: "first"}) // a table of minIndexSlots
	mask := uint64(minIndexSlots - 1)
	at := maphash.String(indexSeed, "") & mask
	for i := 0; ; i++ {
		k := fmt.Sprintf("k%d", i)
		if maphash.String(indexSeed, k)&mask != at {
			continue
		}
		g, _ := x.loadOrStore(&group{key: k})
		x.remove(g)
		break
	}
	if g := x.load(""); g != nil {
		t.Fatalf("load(\"\") = %p (the tombstone: %v), want nil", g, g == tombstone)
	}
	g, loaded := x.loadOrStore(&group{key: ""})
	if loaded || g == tombstone || x.load("") != g {
		t.Fatalf("loadOrStore of the empty key: %p, loaded %v; load finds %p", g, loaded, x.load(""))
	}
}
