package redislimit_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
	"github.com/redis/go-redis/v9"
)

func TestInvalidOptionsNameOptionAndValue(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer c.Close()
	for _, tc := range []struct {
		opts []redislimit.Option
		want string
	}{
		{[]redislimit.Option{redislimit.WithLeaseTTL(50 * time.Millisecond)}, "WithLeaseTTL(50ms)"},
		{[]redislimit.Option{redislimit.WithRenewInterval(0)}, "WithRenewInterval(0s)"},
		{[]redislimit.Option{redislimit.WithRenewInterval(500 * time.Microsecond)}, "WithRenewInterval(500µs)"},
		{[]redislimit.Option{redislimit.WithLeaseTTL(time.Second), redislimit.WithRenewInterval(500 * time.Millisecond)}, "WithRenewInterval(500ms)"},
		{[]redislimit.Option{redislimit.WithPollInterval(-time.Second)}, "WithPollInterval(-1s)"},
		// A refused holder asks again at most once per poll interval, and
		// Redis keeps its waiting record for two renew intervals: a poll
		// interval above the renew interval lets the record lapse between
		// requests, and the others keep their permits as if no one waited.
		{[]redislimit.Option{redislimit.WithRenewInterval(100 * time.Millisecond), redislimit.WithPollInterval(time.Second)},
			"WithPollInterval(1s)"},
		{[]redislimit.Option{redislimit.WithOpTimeout(0)}, "WithOpTimeout(0s)"},
		{[]redislimit.Option{redislimit.WithLeaseTTL(time.Second), redislimit.WithOpTimeout(time.Second)}, "WithOpTimeout(1s)"},
		{[]redislimit.Option{redislimit.WithMaxBlock(0)}, "WithMaxBlock(0)"},
		{[]redislimit.Option{redislimit.WithFailurePolicy(0)}, "WithFailurePolicy(0)"},
		{[]redislimit.Option{redislimit.WithPrefix("")}, `WithPrefix("")`},
		{[]redislimit.Option{redislimit.WithPrefix("a{}b")}, `WithPrefix("a{}b")`},
		{[]redislimit.Option{redislimit.WithPrefix("{}")}, `WithPrefix("{}")`},
		{[]redislimit.Option{redislimit.WithHolderID("")}, `WithHolderID("")`},
		{[]redislimit.Option{redislimit.WithHolderID("a:b")}, `WithHolderID("a:b")`},
		{[]redislimit.Option{redislimit.WithHolderID("a|b")}, `WithHolderID("a|b")`},
		{[]redislimit.Option{redislimit.WithHolderID("a,b")}, `WithHolderID("a,b")`},
		{[]redislimit.Option{redislimit.WithHolderID("a=b")}, `WithHolderID("a=b")`},
		{[]redislimit.Option{redislimit.WithListener(nil)}, "WithListener(nil)"},
	} {
		h, err := redislimit.New(c, tc.opts...)
		if h != nil {
			h.Close()
		}
		if !errors.Is(err, redislimit.ErrInvalidOption) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New: %v, want an error naming %s", err, tc.want)
		}
		// The package doc promises an *OptionError, which names the
		// option and its value as fields too.
		var oe *redislimit.OptionError
		if !errors.As(err, &oe) || !strings.HasPrefix(tc.want, oe.Option+"(") || oe.Reason == "" {
			t.Errorf("New: %#v, want an *OptionError for %s", err, tc.want)
		}
	}
	// A hash tag of the prefix's own keeps every key on one node: taken.
	for _, p := range []string{"a{x}", "a{", "a}", "a}{x}"} {
		h, err := redislimit.New(c, redislimit.WithPrefix(p))
		if err != nil {
			t.Errorf("WithPrefix(%q): %v", p, err)
			continue
		}
		h.Close()
	}
	// The default poll interval is lowered to a renew interval below it,
	// rather than refuse an option the caller did not set.
	if h, err := redislimit.New(c, redislimit.WithLeaseTTL(100*time.Millisecond)); err != nil {
		t.Errorf("WithLeaseTTL(100ms) alone, its renew interval below the default poll interval: %v", err)
	} else {
		h.Close()
	}
	if _, err := redislimit.New(nil); !errors.Is(err, redislimit.ErrInvalidOption) {
		t.Errorf("New(nil): %v", err)
	}
}

func TestInvalidLimitFailsExecutorNew(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	h, err := redislimit.New(c)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	p, _ := policy.New()
	for _, tc := range []struct {
		opt  executor.Option
		want string
	}{
		{executor.WithGroupLimiter(h.Groups(0)), "Groups(0)"},
		{executor.WithGlobalLimiter(h.Global(-1)), "Global(-1)"},
		{executor.WithGroupLimiter(h.GroupsFunc(nil)), "GroupsFunc(nil)"},
	} {
		if _, err := executor.New(p, tc.opt); !errors.Is(err, redislimit.ErrInvalidOption) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("executor.New: %v, want an error naming %s", err, tc.want)
		}
	}
	// A Limiter serves one executor.
	l := h.Groups(3)
	ex, err := executor.New(p, executor.WithGroupLimiter(l))
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	if _, err := executor.New(p, executor.WithGroupLimiter(l)); err == nil {
		t.Error("a second executor attached to the same Limiter")
	}
}

// TestPerGroupLimitsAndTooHeavy checks GroupsFunc's limits and that a task
// heavier than its group's cluster limit is refused as too heavy.
func TestPerGroupLimitsAndTooHeavy(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr)
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(10)}, h.GroupsFunc(func(g string) int {
		if g == "off" {
			return 0
		}
		return 2
	}), nil)
	_, err := executor.Submit(ex, bg, executor.Task[int]{Group: "a", Weight: 3, Fn: func(ctx ctxT) (int, error) { return 0, nil }})
	var rej *executor.RejectedError
	if !errors.As(err, &rej) || !errors.Is(err, executor.ErrTooHeavy) || rej.Limit != executor.LimitClusterGroup {
		t.Fatalf("weight 3 over a cluster limit of 2: %v", err)
	}
	if _, err := executor.Submit(ex, bg, executor.Task[int]{Group: "off", Fn: func(ctx ctxT) (int, error) { return 0, nil }}); !errors.Is(err, executor.ErrRejected) {
		t.Fatalf("a group whose limit is 0: %v", err)
	}
	hd, err := executor.Submit(ex, bg, executor.Task[int]{Group: "a", Weight: 2, Fn: func(ctx ctxT) (int, error) { return 7, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := hd.Wait(ctxTimeout(t, 30*time.Second)); r.Value != 7 {
		t.Fatalf("%+v", r)
	}
}

// A lease TTL long enough that four times it overflows a time.Duration is
// still a TTL: New must take it (not refuse it naming WithOpTimeout, which
// the caller did not set), and the holder's leases must be valid.
func TestLongLeaseTTL(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr, redislimit.WithLeaseTTL(100*365*24*time.Hour))
	l := h.Groups(1)
	p := acquire(t, l, attach(t, l), "g", 1, 5*time.Second)
	defer p.Release()
	if ctx := p.Bind(bg, func(error) {}); !redislimit.Valid(ctx) {
		t.Fatal("a fresh lease of a long TTL is not valid")
	}
}
