package outcome_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/groupexec/groupexec/internal/outcome"
)

func TestIsCancellation(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("x"), false},
		{context.DeadlineExceeded, false},
		{context.Canceled, true},
		{fmt.Errorf("a: %w", fmt.Errorf("b: %w", context.Canceled)), true},
		{errors.Join(errors.New("x"), context.Canceled), true},
	}
	for _, tt := range tests {
		if got := outcome.IsCancellation(tt.err); got != tt.want {
			t.Errorf("IsCancellation(%v) = %v", tt.err, got)
		}
	}
}
