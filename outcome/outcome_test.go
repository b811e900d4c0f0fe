package outcome_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/groupexec/groupexec/outcome"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		err  error
		want outcome.Status
	}{
		{nil, outcome.Success},
		{errors.New("x"), outcome.Failed},
		{context.DeadlineExceeded, outcome.Failed},
		{context.Canceled, outcome.Cancelled},
		{fmt.Errorf("a: %w", fmt.Errorf("b: %w", context.Canceled)), outcome.Cancelled},
		{errors.Join(errors.New("x"), context.Canceled), outcome.Cancelled},
	}
	for _, tt := range tests {
		if got := outcome.Classify(tt.err); got != tt.want {
			t.Errorf("Classify(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestStatusString(t *testing.T) {
	for s, want := range map[outcome.Status]string{
		0:                 "Status(0)",
		outcome.Success:   "Success",
		outcome.Failed:    "Failed",
		outcome.Cancelled: "Cancelled",
		outcome.Rejected:  "Rejected",
		9:                 "Status(9)",
	} {
		if got := s.String(); got != want {
			t.Errorf("Status(%d).String() = %q, want %q", uint8(s), got, want)
		}
	}
}
