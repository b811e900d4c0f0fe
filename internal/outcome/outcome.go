// Package outcome classifies how a task ended. The executor and the bulkhead
// share it so that the same error means the same outcome everywhere.
package outcome

import (
	"context"
	"errors"
)

// IsCancellation reports whether err is, or wraps at any depth,
// context.Canceled: the task ended because someone lost interest in it, not
// because it failed. context.DeadlineExceeded is a failure: the work did not
// finish in the time it was given.
func IsCancellation(err error) bool { return err != nil && errors.Is(err, context.Canceled) }
