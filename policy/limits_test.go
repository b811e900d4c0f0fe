package policy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/policy"
)

func TestGroupLimitsValidate(t *testing.T) {
	ok := policy.GroupLimits{MaxInFlight: 8, MaxConcurrency: 2, QueueThreshold: 0, Share: 1}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid limits (queue threshold 0 included): %v", err)
	}
	unlimited := policy.GroupLimits{MaxInFlight: policy.Unlimited, MaxConcurrency: policy.Unlimited, QueueThreshold: policy.Unlimited, Share: policy.Unlimited}
	if err := unlimited.Validate(); err != nil {
		t.Fatalf("unlimited: %v", err)
	}
	tests := []struct {
		name  string
		edit  func(*policy.GroupLimits)
		field string
		value int
	}{
		{"zero in-flight", func(l *policy.GroupLimits) { l.MaxInFlight = 0 }, "GroupLimits.MaxInFlight", 0},
		{"negative concurrency", func(l *policy.GroupLimits) { l.MaxConcurrency = -3 }, "GroupLimits.MaxConcurrency", -3},
		{"negative threshold", func(l *policy.GroupLimits) { l.QueueThreshold = -1 }, "GroupLimits.QueueThreshold", -1},
		{"zero share", func(l *policy.GroupLimits) { l.Share = 0 }, "GroupLimits.Share", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := ok
			tt.edit(&l)
			err := l.Validate()
			var oe *policy.OptionError
			if !errors.Is(err, policy.ErrInvalidOption) || !errors.As(err, &oe) {
				t.Fatalf("err = %v, want an *OptionError matching ErrInvalidOption", err)
			}
			if oe.Option != tt.field || oe.Value != tt.value || !strings.Contains(err.Error(), tt.field) {
				t.Errorf("err = %v (option %q value %v), want field %s value %d", err, oe.Option, oe.Value, tt.field, tt.value)
			}
		})
	}
	if err := (policy.GroupLimits{}).Validate(); err == nil {
		t.Error("the zero GroupLimits is valid")
	}
}
