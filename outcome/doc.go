// Package outcome names how a unit of work ended, in one vocabulary for the
// whole module: an executor task's Result.Status and a bulkhead operation's
// Result.Status are both a Status, and Classify is the one rule by which a
// function's error becomes one.
//
//	v, err := fetch(ctx)
//	switch outcome.Classify(err) {
//	case outcome.Success: // err == nil
//	case outcome.Cancelled: // err is or wraps context.Canceled
//	case outcome.Failed: // any other error
//	}
//
// Rejected is for work refused before it ran; Classify never returns it.
// The package imports only the standard library, and executor and bulkhead
// re-export its names (executor.Status, bulkhead.Success, ...), so a caller
// of either need not import it. ExampleClassify (example_test.go) runs the
// rule on the errors a function may return.
package outcome
