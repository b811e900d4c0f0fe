package bulkhead_test

import (
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/groupexec/groupexec/bulkhead"
)

// codeLog records the codes of the events its listeners hear, by listener.
type codeLog struct {
	mu    sync.Mutex
	heard []string
}

func (l *codeLog) listener(name string) bulkhead.ListenerFunc {
	return func(e bulkhead.Event) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.heard = append(l.heard, name+":"+e.Code)
	}
}

func (l *codeLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.heard, " ")
}

// Listeners calls each listener for every event, in order, skipping nil
// ones and flattening a Listeners among them.
func TestListenersCallsEachInOrder(t *testing.T) {
	var log codeLog
	b := newBH(t, 1, bulkhead.WithEventLog(16), bulkhead.WithListener(bulkhead.Listeners(
		log.listener("a"), nil, bulkhead.Listeners(log.listener("b"), log.listener("c")))))
	p, err := b.TryAcquire(bg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryAcquire(bg, 1); err == nil {
		t.Fatal("a second permit past the limit of 1")
	}
	if err := b.Release(p); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, e := range b.Events() {
		want = append(want, "a:"+e.Code, "b:"+e.Code, "c:"+e.Code)
	}
	if len(want) < 9 {
		t.Fatalf("events %v: want an acquire, a refusal and a release", b.Events())
	}
	if got := log.String(); got != strings.Join(want, " ") {
		t.Errorf("heard %q,\nwant  %q", got, strings.Join(want, " "))
	}
}

// Listeners of no listener is nil, which WithListener refuses; of one, that
// listener.
func TestListenersOfNoneOrOne(t *testing.T) {
	if l := bulkhead.Listeners(nil, bulkhead.Listeners()); l != nil {
		t.Errorf("Listeners of none = %v, want nil", l)
	}
	var log codeLog
	one := log.listener("a")
	if l, ok := bulkhead.Listeners(nil, one).(bulkhead.ListenerFunc); !ok || l == nil {
		t.Errorf("Listeners of one = %T, want that listener", l)
	}
	if _, err := bulkhead.New(1, bulkhead.WithListener(bulkhead.Listeners())); !errors.Is(err, bulkhead.ErrInvalidConfig) {
		t.Errorf("WithListener(Listeners()) = %v, want ErrInvalidConfig", err)
	}
}

// A listener that panics or exits the goroutine keeps no later listener
// from hearing the event, and the bulkhead keeps working: the panic is
// recovered by the bulkhead, and the exit ends only the caller's goroutine,
// whose permit the bulkhead takes back, as for a single listener.
func TestListenersAFailingOneDoesNotSilenceTheRest(t *testing.T) {
	var log codeLog
	var exits sync.Once
	panicking := bulkhead.ListenerFunc(func(bulkhead.Event) { panic("listener") })
	exiting := bulkhead.ListenerFunc(func(e bulkhead.Event) {
		if e.Code == bulkhead.EventPermitAcquired {
			exits.Do(runtime.Goexit)
		}
	})
	b := newBH(t, 1, bulkhead.WithEventLog(16), bulkhead.WithListener(bulkhead.Listeners(panicking, exiting, log.listener("last"))))
	acquired := make(chan bulkhead.Permit, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p, err := b.TryAcquire(bg, 1) // its Acquired event exits this goroutine
		if err == nil {
			acquired <- p
		}
	}()
	<-done
	if len(acquired) != 0 {
		t.Fatal("TryAcquire returned: the exit did not end its goroutine")
	}
	if b.InFlight() != 0 {
		t.Fatalf("in flight %d: the permit that never reached its caller was not taken back", b.InFlight())
	}
	p, err := b.TryAcquire(bg, 1) // the panicking listener hears this one too
	if err != nil {
		t.Fatalf("second TryAcquire: %v", err)
	}
	if err := b.Release(p); err != nil {
		t.Fatal(err)
	}
	var heard []string
	for _, e := range b.Events() {
		heard = append(heard, "last:"+e.Code)
	}
	if want := strings.Join(heard, " "); len(heard) < 2 || log.String() != want {
		t.Errorf("the last listener heard %q, want every event: %q", log.String(), want)
	}
}

// A second WithListener is refused: it would replace the first without a
// word. So is a nil pointer among the listeners Listeners combines.
func TestWithListenerTwiceIsRefused(t *testing.T) {
	var log codeLog
	_, err := bulkhead.New(1, bulkhead.WithListener(log.listener("a")), bulkhead.WithListener(log.listener("b")))
	var ce *bulkhead.ConfigError
	if !errors.As(err, &ce) || ce.Option != "WithListener" || !strings.Contains(ce.Reason, "Listeners") {
		t.Errorf("WithListener twice: %v, want a ConfigError for WithListener pointing to Listeners", err)
	}
	var nilFunc bulkhead.ListenerFunc
	if _, err := bulkhead.New(1, bulkhead.WithListener(bulkhead.Listeners(log.listener("a"), nilFunc))); !errors.Is(err, bulkhead.ErrInvalidConfig) {
		t.Errorf("a nil function among Listeners: %v, want ErrInvalidConfig", err)
	}
}
