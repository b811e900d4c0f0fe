package adapt_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/internal/adapt"
)

func TestOne(t *testing.T) {
	for _, tc := range []struct {
		vs   []string
		want string
		err  bool
	}{
		{nil, "", false},
		{[]string{"a"}, "a", false},
		{[]string{" \ta b"}, "", true},
		{[]string{"\t a\t "}, "a", false},
		{[]string{" \t "}, "", true},
		{[]string{"a", "a"}, "", true},
	} {
		got, err := adapt.One("header X", tc.vs)
		if got != tc.want || (err != nil) != tc.err || (err != nil && !errors.Is(err, adapt.ErrInvalidTenant)) {
			t.Errorf("One(%q) = %q, %v", tc.vs, got, err)
		}
	}
}

func TestWeight(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		w    int
		err  error
		want int
	}{
		{1, nil, 1}, {0, nil, 1}, {7, nil, 7}, {-1, nil, 0}, {3, boom, 0},
	} {
		got, err := adapt.Weight(tc.w, tc.err)
		if got != tc.want || (tc.want == 0) != errors.Is(err, adapt.ErrInvalidWeight) {
			t.Errorf("Weight(%d, %v) = %d, %v", tc.w, tc.err, got, err)
		}
		if tc.err != nil && !errors.Is(err, tc.err) {
			t.Errorf("Weight's error %v does not wrap %v", err, tc.err)
		}
	}
}

func TestClassify(t *testing.T) {
	heavy := &executor.RejectedError{Limit: executor.LimitGroupConcurrency, Weight: 5, Max: 4, Err: executor.ErrTooHeavy}
	for _, tc := range []struct {
		err   error
		want  adapt.Reason
		retry bool
	}{
		{fmt.Errorf("lookup: %w: dial 10.0.0.1: refused", adapt.ErrUnavailable), adapt.Unavailable, true},
		{fmt.Errorf("%w: %w", adapt.ErrInvalidTenant, adapt.ErrUnavailable), adapt.Unavailable, true},
		{fmt.Errorf("%w: x", adapt.ErrInvalidTenant), adapt.InvalidTenant, false},
		{fmt.Errorf("%w: x", adapt.ErrInvalidWeight), adapt.InvalidWeight, false},
		{heavy, adapt.TooHeavy, false},
		{&executor.RejectedError{Limit: executor.LimitBreaker, Err: breaker.ErrOpenState}, adapt.BreakerOpen, true},
		{&executor.RejectedError{Limit: executor.LimitShutdown, Err: executor.ErrGroupShutdown}, adapt.Shutdown, true},
		{&executor.RejectedError{Limit: executor.LimitGroupInFlight}, adapt.Rejected, true},
		{&executor.RejectedError{Limit: executor.LimitResolver, Err: errors.New("0 from WithMaxConcurrencyResolver")}, adapt.Misconfigured, false},
		{&executor.RejectedError{Limit: executor.LimitInvalid, Err: executor.ErrInvalidTask}, adapt.Misconfigured, false},
		{context.Canceled, adapt.Canceled, false},
		{context.DeadlineExceeded, adapt.DeadlineExceeded, false},
		{errors.New("other"), adapt.Unknown, false},
	} {
		r, _ := adapt.Classify(tc.err)
		if r != tc.want || r.Retry() != tc.retry {
			t.Errorf("Classify(%v) = %d (retry %v), want %d (retry %v)", tc.err, r, r.Retry(), tc.want, tc.retry)
		}
	}
	if _, msg := adapt.Classify(heavy); msg != "the weight 5 exceeds the group concurrency limit (4)" {
		t.Errorf("too heavy: %q", msg)
	}
}

// A header name or metadata key that the protocol cannot carry is refused,
// naming the option and the value; the valid ones pass.
func TestHeaderNameAndMetadataKey(t *testing.T) {
	for _, name := range []string{"X-Tenant", "x_org", "a.b", "!#$%&'*+-.^_`|~09AZaz"} {
		if err := adapt.HeaderName(name); err != nil {
			t.Errorf("HeaderName(%q): %v", name, err)
		}
	}
	for _, name := range []string{"", "X Tenant", "X-Tenant:", "x\t", "ä", "a\"b", "(x)"} {
		if err := adapt.HeaderName(name); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("WithTenantHeader(%q)", name)) {
			t.Errorf("HeaderName(%q) = %v, want an error naming the option and the value", name, err)
		}
	}
	for _, key := range []string{"x-tenant", "X-Org", "a_b.c-9", "x-tenant-bin", "grpc-tenant", "tenant"} {
		if err := adapt.MetadataKey(key); err != nil {
			t.Errorf("MetadataKey(%q): %v", key, err)
		}
	}
	for _, key := range []string{"", "x tenant", "x-tenant:", "x~t", "ä",
		"content-type", "User-Agent", "te", "grpc-encoding", "grpc-message", "grpc-message-type", "grpc-status", "grpc-timeout"} {
		if err := adapt.MetadataKey(key); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("WithTenantKey(%q)", key)) {
			t.Errorf("MetadataKey(%q) = %v, want an error naming the option and the value", key, err)
		}
	}
}
