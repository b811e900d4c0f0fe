package executor

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// newIndexed returns an executor with only what the group index needs.
func newIndexed() *Executor {
	ex := &Executor{groups: make(map[string]*group)}
	ex.index.Store(&groupIndex{slots: make([]atomic.Pointer[group], minIndexSlots)})
	return ex
}

func (ex *Executor) addIndexed(key string) *group {
	g := &group{key: key}
	g.lane.key = key
	ex.groups[key] = g
	ex.indexLocked(g)
	return g
}

func (ex *Executor) dropIndexed(key string) {
	g := ex.groups[key]
	delete(ex.groups, key)
	ex.unindexLocked(g)
}

// checkIndex checks that the index finds exactly what ex.groups holds, for
// every key in keys, and that it keeps room for probes to end.
func checkIndex(ex *Executor, keys []string) error {
	ix := ex.index.Load()
	if n := len(ix.slots); n&(n-1) != 0 || 2*ix.used > n {
		return fmt.Errorf("index of %d slots, %d used: not a power of two, or over half full", n, ix.used)
	}
	used := 0
	for i := range ix.slots {
		if ix.slots[i].Load() != nil {
			used++
		}
	}
	if used != ix.used {
		return fmt.Errorf("index counts %d used slots, has %d", ix.used, used)
	}
	for _, k := range keys {
		if got, want := ex.findGroup(k), ex.groups[k]; got != want {
			return fmt.Errorf("index finds %p for %q, groups holds %p", got, k, want)
		}
	}
	return nil
}

func TestIndexMirrorsGroups(t *testing.T) {
	ex := newIndexed()
	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([]string, 300)
	for i := range keys {
		keys[i] = fmt.Sprintf("tenant-%d", i)
	}
	if err := checkIndex(ex, keys); err != nil {
		t.Fatal(err)
	}
	grew := 0
	for op := range 50_000 {
		k := keys[rng.IntN(len(keys))]
		if ex.groups[k] != nil && rng.IntN(2) == 0 {
			ex.dropIndexed(k)
		} else if ex.groups[k] == nil {
			before := ex.index.Load()
			ex.addIndexed(k)
			if ex.index.Load() != before {
				grew++
			}
		}
		if got, want := ex.findGroup(k), ex.groups[k]; got != want {
			t.Fatalf("op %d: index finds %p for %q, groups holds %p", op, got, k, want)
		}
		if op%997 == 0 {
			if err := checkIndex(ex, keys); err != nil {
				t.Fatalf("op %d: %v", op, err)
			}
		}
	}
	if err := checkIndex(ex, keys); err != nil {
		t.Fatal(err)
	}
	if grew < 10 {
		t.Fatalf("the index was rebuilt %d times: the test did not exercise rebuilds", grew)
	}
	// Dropping everything leaves a table that finds nothing, shrunk back.
	for k := range ex.groups {
		ex.dropIndexed(k)
	}
	if err := checkIndex(ex, keys); err != nil {
		t.Fatal(err)
	}
	if n := len(ex.index.Load().slots); n != minIndexSlots {
		t.Fatalf("index of %d slots with no group left, want %d", n, minIndexSlots)
	}
}

// A burst of groups, dropped, does not leave its table behind, and the
// table keeps finding the groups that stay while it shrinks.
func TestIndexShrinks(t *testing.T) {
	ex := newIndexed()
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("burst-%d", i)
		ex.addIndexed(keys[i])
	}
	if err := checkIndex(ex, keys); err != nil {
		t.Fatal(err)
	}
	peak := len(ex.index.Load().slots)
	if peak < 16*len(keys)/100 {
		t.Fatalf("index of %d slots for %d groups: too small for the drops below to shrink it", peak, len(keys))
	}
	for i, k := range keys {
		if i%100 != 0 {
			ex.dropIndexed(k)
		}
	}
	if err := checkIndex(ex, keys); err != nil {
		t.Fatal(err)
	}
	if n := len(ex.index.Load().slots); n > peak/16 {
		t.Fatalf("index of %d slots for %d groups left (peak %d)", n, len(ex.groups), peak)
	}
}

// Readers find without the lock while a writer adds and drops groups (as
// under the lock), rebuilding the index. A group added before the readers started and
// never dropped must always be found: an old table still holds it, and a
// new one holds every group in ex.groups. No reader may find a group under
// another key. Run with -race.
func TestIndexReadersWhileRebuilt(t *testing.T) {
	ex := newIndexed()
	stable := make(map[string]*group)
	for i := range 20 {
		k := fmt.Sprintf("stable-%d", i)
		stable[k] = ex.addIndexed(k)
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	errs := make(chan error, 4)
	for r := range 4 {
		readers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				i := rng.IntN(40)
				var k string
				if i < 20 {
					k = fmt.Sprintf("stable-%d", i)
				} else {
					k = fmt.Sprintf("churn-%d-%d", i, rng.IntN(50))
				}
				g := ex.findGroup(k)
				switch {
				case i < 20 && g != stable[k]:
					errs <- fmt.Errorf("reader %d: %q found as %p, want %p", r, k, g, stable[k])
					return
				case g != nil && g.key != k:
					errs <- fmt.Errorf("reader %d: %q found group %q", r, k, g.key)
					return
				}
			}
		})
	}
	// The one writer, as the executor's lock makes it.
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20_000 {
		k := fmt.Sprintf("churn-%d-%d", rng.IntN(20)+20, rng.IntN(50))
		if ex.groups[k] != nil {
			ex.dropIndexed(k)
		} else {
			ex.addIndexed(k)
		}
	}
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
