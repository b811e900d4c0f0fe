package queue_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/groupexec/groupexec/internal/queue"
)

type item struct {
	node queue.Node[*item]
	v    int
}

func newItem(v int) *item {
	it := &item{v: v}
	it.node.Value = it
	return it
}

func values(l *queue.List[*item]) []int {
	var out []int
	for n := l.Front(); n != nil; n = n.Next() {
		out = append(out, n.Value.v)
	}
	return out
}

func TestFIFOAndRemove(t *testing.T) {
	var l queue.List[*item]
	items := make([]*item, 5)
	for i := range items {
		items[i] = newItem(i)
		l.PushBack(&items[i].node)
	}
	if !l.Remove(&items[2].node) || l.Remove(&items[2].node) {
		t.Fatal("Remove must succeed once")
	}
	l.Remove(&items[0].node) // front
	l.Remove(&items[4].node) // back
	if got := values(&l); !slices.Equal(got, []int{1, 3}) || l.Len() != 2 {
		t.Fatalf("list %v len %d", got, l.Len())
	}
	if n := l.PopFront(); n.Value.v != 1 || n.InList() {
		t.Fatal("PopFront")
	}
	var other queue.List[*item]
	if other.Remove(&items[3].node) {
		t.Fatal("removed a node from a list it is not in")
	}
	l.PopFront()
	if l.PopFront() != nil || l.Front() != nil || l.Len() != 0 {
		t.Fatal("empty list not empty")
	}
}

func TestPushBackOfLinkedNodePanics(t *testing.T) {
	var l queue.List[*item]
	it := newItem(1)
	l.PushBack(&it.node)
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	l.PushBack(&it.node)
}

func TestPushFront(t *testing.T) {
	var l queue.List[*item]
	a, b, c := newItem(1), newItem(2), newItem(3)
	l.PushFront(&b.node) // into an empty list
	l.PushBack(&c.node)
	l.PushFront(&a.node)
	if got := values(&l); !slices.Equal(got, []int{1, 2, 3}) || l.Len() != 3 {
		t.Fatalf("list %v len %d", got, l.Len())
	}
	l.Remove(&c.node) // back, after a PushFront
	l.Remove(&a.node)
	if got := values(&l); !slices.Equal(got, []int{2}) || l.Front() != &b.node {
		t.Fatalf("list %v", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	l.PushFront(&b.node)
}

// TestRandomOpsMatchSlice checks the list against a slice model.
func TestRandomOpsMatchSlice(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var l queue.List[*item]
	var model []*item
	for i := range 10_000 {
		switch op := r.IntN(5); {
		case op == 0 || len(model) == 0:
			it := newItem(i)
			l.PushBack(&it.node)
			model = append(model, it)
		case op == 3:
			it := newItem(i)
			l.PushFront(&it.node)
			model = slices.Insert(model, 0, it)
		case op == 1:
			k := r.IntN(len(model))
			l.Remove(&model[k].node)
			model = slices.Delete(model, k, k+1)
		case op == 4:
			l.Rotate()
			model = append(model[1:], model[0])
		default:
			n := l.PopFront()
			if n.Value != model[0] {
				t.Fatal("PopFront out of order")
			}
			model = model[1:]
		}
		if l.Len() != len(model) {
			t.Fatalf("len %d, model %d", l.Len(), len(model))
		}
		if i%97 == 0 {
			checkModel(t, &l, model)
		}
	}
	checkModel(t, &l, model)
}

func checkModel(t *testing.T, l *queue.List[*item], model []*item) {
	t.Helper()
	want := make([]int, len(model))
	for i, it := range model {
		want[i] = it.v
	}
	if got := values(l); !slices.Equal(got, want) {
		t.Fatalf("list %v, model %v", got, want)
	}
}

func TestRotate(t *testing.T) {
	var l queue.List[*item]
	l.Rotate() // empty: nothing to do
	a, b, c := newItem(1), newItem(2), newItem(3)
	l.PushBack(&a.node)
	l.Rotate()
	if l.Front() != &a.node || a.node.Next() != nil {
		t.Fatal("rotating one node")
	}
	l.PushBack(&b.node)
	l.PushBack(&c.node)
	l.Rotate()
	if got := values(&l); !slices.Equal(got, []int{2, 3, 1}) {
		t.Fatalf("after Rotate %v", got)
	}
	l.Remove(&a.node) // the back
	l.PushFront(&a.node)
	if got := values(&l); !slices.Equal(got, []int{1, 2, 3}) || c.node.Next() != nil {
		t.Fatalf("after PushFront %v", got)
	}
}

func TestRingMatchesSlice(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var ring queue.Ring[int]
	var model []int
	// Phases that grow the ring, hold its size (so that indexes wrap many
	// times at one buffer length), and shrink it, in turn: pushes out of 6.
	pushesIn6 := []int{4, 3, 2, 4, 3, 1}
	for i := range 30_000 {
		if r.IntN(6) < pushesIn6[i/5000] || len(model) == 0 {
			ring.Push(i)
			model = append(model, i)
			continue
		}
		v, ok := ring.Pop()
		if !ok || v != model[0] {
			t.Fatalf("Pop = %d, %v; want %d", v, ok, model[0])
		}
		model = model[1:]
		if ring.Len() != len(model) {
			t.Fatalf("len %d, model %d", ring.Len(), len(model))
		}
	}
	for _, want := range model {
		if v, _ := ring.Pop(); v != want {
			t.Fatalf("drain: %d, want %d", v, want)
		}
	}
	if _, ok := ring.Pop(); ok || ring.Len() != 0 {
		t.Fatal("empty ring popped a value")
	}
}
