package outcome_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/groupexec/groupexec/outcome"
)

// Classify turns a function's error into a Status by the rule the executor
// and the bulkhead share: a cancellation is not a failure, a deadline is.
func ExampleClassify() {
	for _, err := range []error{
		nil,
		errors.New("connection refused"),
		fmt.Errorf("fetch: %w", context.Canceled),
		context.DeadlineExceeded,
	} {
		fmt.Println(outcome.Classify(err))
	}
	// Output:
	// Success
	// Failed
	// Cancelled
	// Failed
}
