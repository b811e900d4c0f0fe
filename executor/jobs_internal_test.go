package executor

import (
	"context"
	"testing"
	"unsafe"

	"github.com/groupexec/groupexec/policy"
)

// The handle's size is a measured cost (jobs.go): keep a Handle[struct{}]
// in the 144-byte size class, a Handle[int] in the 160-byte one, and a
// task started with Go in the 96-byte one.
func TestHandleSize(t *testing.T) {
	if n := unsafe.Sizeof(Handle[struct{}]{}); n > 144 {
		t.Errorf("Handle[struct{}] is %d bytes, want at most 144", n)
	}
	if n := unsafe.Sizeof(Handle[int]{}); n > 160 {
		t.Errorf("Handle[int] is %d bytes, want at most 160", n)
	}
	// A Go task has no handle fields (id, outcome, Done channel): it fits
	// the 96-byte class, a third less to zero and scan per task.
	if n := unsafe.Sizeof(goTask{}); n > 96 {
		t.Errorf("a task started with Go is %d bytes, want at most 96", n)
	}
}

func listIDs(l *jobList) []string {
	var ids []string
	for j := l.Front(); j != nil; j = j.next {
		ids = append(ids, string(rune('a'+j.weight)))
	}
	return ids
}

func TestJobList(t *testing.T) {
	var l jobList
	js := make([]*job, 5)
	for i := range js {
		js[i] = &job{weight: i} // the weight names it here
		l.PushBack(js[i])
	}
	check := func(want string) {
		t.Helper()
		got := ""
		for _, id := range listIDs(&l) {
			got += id
		}
		if got != want || l.Len() != len(want) {
			t.Fatalf("list %q (Len %d), want %q", got, l.Len(), want)
		}
		if msg := checkList(&l); msg != "" {
			t.Fatal(msg)
		}
	}
	check("abcde")
	l.Remove(js[2]) // middle
	check("abde")
	l.Remove(js[0]) // front
	check("bde")
	l.Remove(js[4]) // back
	check("bd")
	l.PushBack(js[0]) // a removed job can go back in
	check("bda")
	l.Remove(js[1])
	l.Remove(js[3])
	l.Remove(js[0])
	check("")
	if l.Front() != nil || l.back != nil {
		t.Fatal("an empty list keeps a job")
	}
}

func TestJobListMisuse(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", name)
			}
		}()
		f()
	}
	var l jobList
	a, b := &job{}, &job{}
	l.PushBack(a)
	mustPanic("PushBack of a member", func() { l.PushBack(a) })
	mustPanic("Remove of a non-member", func() { l.Remove(b) })
	if l.Len() != 1 || l.Front() != a {
		t.Fatal("misuse changed the list")
	}
}

// A plain task (a context that is never cancelled, no breaker, no cluster
// limiter, no Cancel) never makes the side struct, and Submit plus a
// blocking Wait allocate the handle and the Done channel at most.
func TestPlainTaskAllocations(t *testing.T) {
	p, err := policy.New(policy.WithGlobalMaxInFlight(4), policy.WithDefaultMaxConcurrency(4))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	ctx := context.Background()
	task := Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 1, nil }}
	var last *Handle[int]
	run := func() {
		h, err := Submit(ex, ctx, task)
		if err != nil {
			t.Fatal(err)
		}
		if r, _ := h.Wait(ctx); r.Status != Success || r.Value != 1 {
			t.Fatalf("result %+v", r)
		}
		last = h
	}
	run() // a worker now exists and parks between tasks
	if n := testing.AllocsPerRun(200, run); n > 2 {
		t.Errorf("Submit + Wait allocated %v times per task, want at most 2", n)
	}
	if last.x.Load() != nil {
		t.Error("a plain task made its side struct")
	}

	// Cancel needs it, once.
	started, release := make(chan struct{}), make(chan struct{})
	h, _ := Submit(ex, ctx, Task[int]{Group: "g", Fn: func(ctx context.Context) (int, error) {
		close(started)
		<-release
		return 0, ctx.Err()
	}})
	recv(t, started, "the task started")
	h.Cancel()
	close(release)
	if r, _ := h.Wait(ctx); r.Status != Cancelled {
		t.Fatalf("cancelled task: %v", r.Status)
	}
	if h.x.Load() == nil {
		t.Error("a cancelled task has no side struct")
	}
}
