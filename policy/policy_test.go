package policy_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/groupexec/groupexec/policy"
)

func TestDefaults(t *testing.T) {
	p, err := policy.New()
	if err != nil {
		t.Fatal(err)
	}
	l, err := p.Group("any")
	if err != nil {
		t.Fatal(err)
	}
	if p.GlobalMaxInFlight() != policy.Unlimited || p.GlobalQueueThreshold() != policy.Unlimited ||
		p.QueueTimeout() != 0 || p.RejectionPolicy() != policy.Abort {
		t.Errorf("defaults: %v", p)
	}
	if l != (policy.GroupLimits{MaxInFlight: 1024, MaxConcurrency: 1, QueueThreshold: policy.Unlimited, Share: 1}) {
		t.Errorf("group defaults: %+v", l)
	}
}

func TestResolutionOrder(t *testing.T) {
	calls := map[string]int{}
	// Each resolver answers for every group but "plain", and counts its
	// calls by limit.
	resolver := func(limit string, n int) func(string) (int, bool) {
		return func(g string) (int, bool) {
			calls[limit]++
			return n, g != "plain"
		}
	}
	p, err := policy.New(
		policy.WithDefaultMaxInFlight(64),
		policy.WithDefaultMaxConcurrency(4),
		policy.WithDefaultQueueThreshold(100),
		policy.WithDefaultShare(2),
		policy.WithGroupMaxInFlight("vip", 256),
		policy.WithGroupMaxConcurrency("vip", 16),
		policy.WithGroupQueueThreshold("vip", 1000),
		policy.WithGroupShare("vip", 5),
		policy.WithMaxInFlightResolver(resolver("in-flight", 128)),
		policy.WithMaxConcurrencyResolver(resolver("concurrency", 8)),
		policy.WithQueueThresholdResolver(resolver("queue", 0)), // 0 is a valid threshold
		policy.WithShareResolver(resolver("share", 3)),
	)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		group string
		want  policy.GroupLimits
	}{
		{"vip", policy.GroupLimits{MaxInFlight: 256, MaxConcurrency: 16, QueueThreshold: 1000, Share: 5}}, // per-group wins
		{"resolved", policy.GroupLimits{MaxInFlight: 128, MaxConcurrency: 8, QueueThreshold: 0, Share: 3}},
		{"plain", policy.GroupLimits{MaxInFlight: 64, MaxConcurrency: 4, QueueThreshold: 100, Share: 2}}, // resolvers said no
	}
	for _, tt := range tests {
		got, err := p.Group(tt.group)
		if err != nil || got != tt.want {
			t.Errorf("Group(%q) = %+v, %v; want %+v", tt.group, got, err, tt.want)
		}
	}
	for _, limit := range []string{"in-flight", "concurrency", "queue", "share"} {
		if calls[limit] != 2 {
			t.Errorf("%s resolver called %d times; a per-group value must skip it", limit, calls[limit])
		}
	}
}

func TestLaterOptionWins(t *testing.T) {
	p, err := policy.New(
		policy.WithGlobalMaxInFlight(1), policy.WithGlobalMaxInFlight(9),
		policy.WithGroupMaxConcurrency("g", 2), policy.WithGroupMaxConcurrency("g", 3),
		policy.WithRejectionPolicy(policy.CallerRuns), policy.WithRejectionPolicy(policy.Discard),
	)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := p.Group("g")
	if p.GlobalMaxInFlight() != 9 || l.MaxConcurrency != 3 || p.RejectionPolicy() != policy.Discard {
		t.Errorf("got %v, %+v", p, l)
	}
}

func TestInvalidOptions(t *testing.T) {
	tests := []struct {
		opt      policy.Option
		name     string
		valueStr string
	}{
		{policy.WithGlobalMaxInFlight(0), "WithGlobalMaxInFlight", "0"},
		{policy.WithDefaultMaxInFlight(-1), "WithDefaultMaxInFlight", "-1"},
		{policy.WithDefaultMaxConcurrency(0), "WithDefaultMaxConcurrency", "0"},
		{policy.WithGroupMaxInFlight("g", 0), "WithGroupMaxInFlight", `"g", 0`},
		{policy.WithGroupMaxConcurrency("g", -5), "WithGroupMaxConcurrency", `"g", -5`},
		{policy.WithGroupMaxConcurrency("", 5), "WithGroupMaxConcurrency", `""`},
		{policy.WithGlobalQueueThreshold(-1), "WithGlobalQueueThreshold", "-1"},
		{policy.WithDefaultQueueThreshold(-2), "WithDefaultQueueThreshold", "-2"},
		{policy.WithGroupQueueThreshold("g", -1), "WithGroupQueueThreshold", `"g", -1`},
		{policy.WithQueueTimeout(-time.Second), "WithQueueTimeout", "-1s"},
		{policy.WithRejectionPolicy(policy.RejectionPolicy(9)), "WithRejectionPolicy", "RejectionPolicy(9)"},
		{policy.WithMaxInFlightResolver(nil), "WithMaxInFlightResolver", "nil"},
		{policy.WithMaxConcurrencyResolver(nil), "WithMaxConcurrencyResolver", "nil"},
		{policy.WithQueueThresholdResolver(nil), "WithQueueThresholdResolver", "nil"},
		{policy.WithDefaultShare(0), "WithDefaultShare", "0"},
		{policy.WithGroupShare("g", -1), "WithGroupShare", `"g", -1`},
		{policy.WithGroupShare("", 2), "WithGroupShare", `""`},
		{policy.WithShareResolver(nil), "WithShareResolver", "nil"},
		{policy.WithRejectionPolicy(policy.RejectionPolicy(4)), "WithRejectionPolicy", "RejectionPolicy(4)"},
		{policy.WithRejectionPolicy(policy.RejectionPolicy(-1)), "WithRejectionPolicy", "RejectionPolicy(-1)"},
		{nil, "New", "nil Option"},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/"+tt.valueStr, func(t *testing.T) {
			p, err := policy.New(policy.WithGlobalMaxInFlight(5), tt.opt)
			if p != nil || !errors.Is(err, policy.ErrInvalidOption) {
				t.Fatalf("New = %v, %v; want an ErrInvalidOption", p, err)
			}
			var oe *policy.OptionError
			if !errors.As(err, &oe) || oe.Option != tt.name {
				t.Fatalf("err %v does not name option %s", err, tt.name)
			}
			if !strings.Contains(err.Error(), tt.name+"("+tt.valueStr+")") {
				t.Errorf("message %q does not show %s(%s)", err, tt.name, tt.valueStr)
			}
		})
	}
}

func TestZeroThresholdsAreValid(t *testing.T) {
	p, err := policy.New(policy.WithGlobalQueueThreshold(0), policy.WithDefaultQueueThreshold(0), policy.WithQueueTimeout(0))
	if err != nil || p.GlobalQueueThreshold() != 0 {
		t.Fatalf("%v %v", p, err)
	}
}

// A resolver's invalid answer is an error naming the resolver, the value
// and the group; the least valid answer is not.
func TestResolverInvalidAnswerIsAnError(t *testing.T) {
	tests := []struct {
		name  string
		opt   func(func(string) (int, bool)) policy.Option
		least int
	}{
		{"WithMaxInFlightResolver", policy.WithMaxInFlightResolver, 1},
		{"WithMaxConcurrencyResolver", policy.WithMaxConcurrencyResolver, 1},
		{"WithQueueThresholdResolver", policy.WithQueueThresholdResolver, 0},
		{"WithShareResolver", policy.WithShareResolver, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := policy.New(tt.opt(func(string) (int, bool) { return tt.least - 1, true }))
			_, err := p.Group("g")
			want := fmt.Sprintf(`%s gave %d for group "g"`, tt.name, tt.least-1)
			if !errors.Is(err, policy.ErrInvalidOption) || !strings.Contains(err.Error(), want) {
				t.Errorf("err = %v, want ErrInvalidOption saying %s", err, want)
			}
			p, _ = policy.New(tt.opt(func(string) (int, bool) { return tt.least, true }))
			if _, err := p.Group("g"); err != nil {
				t.Errorf("answer %d: %v", tt.least, err)
			}
		})
	}
}

func TestOptionMapsAreNotShared(t *testing.T) {
	opts := []policy.Option{policy.WithGroupMaxConcurrency("a", 2)}
	p1, _ := policy.New(opts...)
	p2, _ := policy.New(append(opts, policy.WithGroupMaxConcurrency("a", 7))...)
	l1, _ := p1.Group("a")
	l2, _ := p2.Group("a")
	if l1.MaxConcurrency != 2 || l2.MaxConcurrency != 7 {
		t.Errorf("policies share state: %d %d", l1.MaxConcurrency, l2.MaxConcurrency)
	}
}

func TestShares(t *testing.T) {
	calls := 0
	p, err := policy.New(
		policy.WithDefaultShare(2),
		policy.WithGroupShare("vip", 5),
		policy.WithShareResolver(func(g string) (int, bool) {
			calls++
			return 3, g != "plain"
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	for group, want := range map[string]int{"vip": 5, "resolved": 3, "plain": 2} {
		if l, err := p.Group(group); err != nil || l.Share != want {
			t.Errorf("Group(%q).Share = %d, %v; want %d", group, l.Share, err, want)
		}
	}
	if calls != 2 {
		t.Errorf("share resolver called %d times; a per-group value must skip it", calls)
	}
	d, _ := policy.New()
	if l, _ := d.Group("g"); l.Share != policy.DefaultShare || policy.DefaultShare != 1 {
		t.Errorf("default share %d", l.Share)
	}
}

// String prints every Unlimited default as "unlimited", a share included,
// not as the number that stands for it.
func TestStringPrintsUnlimitedShare(t *testing.T) {
	p, err := policy.New(policy.WithDefaultShare(policy.Unlimited))
	if err != nil {
		t.Fatal(err)
	}
	s := p.String()
	if !strings.Contains(s, " share=unlimited ") || strings.Contains(s, fmt.Sprint(policy.Unlimited)) {
		t.Errorf("String() = %q; want share=unlimited", s)
	}
}

func TestRejectionPolicyNames(t *testing.T) {
	for r, want := range map[policy.RejectionPolicy]string{
		policy.Abort: "Abort", policy.Discard: "Discard", policy.CallerRuns: "CallerRuns", policy.DiscardOldest: "DiscardOldest",
	} {
		if r.String() != want {
			t.Errorf("%d: %q, want %q", int(r), r.String(), want)
		}
		if _, err := policy.New(policy.WithRejectionPolicy(r)); err != nil {
			t.Errorf("%v: %v", r, err)
		}
	}
}

// A per-group option's error names the group as well as the value: a policy
// built from configuration sets the same option for many groups, and the
// value alone does not say which one is wrong (a resolver's error names the
// group too). Value stays the number given.
func TestInvalidGroupOptionNamesGroup(t *testing.T) {
	tests := []struct {
		opt  policy.Option
		want string
	}{
		{policy.WithGroupMaxInFlight("vip", 0), `WithGroupMaxInFlight("vip", 0)`},
		{policy.WithGroupMaxConcurrency("vip", -5), `WithGroupMaxConcurrency("vip", -5)`},
		{policy.WithGroupQueueThreshold("vip", -1), `WithGroupQueueThreshold("vip", -1)`},
		{policy.WithGroupShare("vip", 0), `WithGroupShare("vip", 0)`},
	}
	for _, tt := range tests {
		_, err := policy.New(policy.WithGroupMaxInFlight("ok", 3), tt.opt)
		var oe *policy.OptionError
		if !errors.As(err, &oe) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("err = %v, want an *OptionError showing %s", err, tt.want)
			continue
		}
		if n, ok := oe.Value.(int); !ok || !strings.HasSuffix(tt.want, fmt.Sprintf(" %d)", n)) {
			t.Errorf("%s: Value = %#v, want the number given", tt.want, oe.Value)
		}
	}
}
