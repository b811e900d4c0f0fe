// Package policy holds the limits a grouped executor enforces: how much work may
// run at once across all groups, how much one group may have admitted and
// running, how long work may wait, and what happens to work that does not fit.
//
// A Policy is pure, immutable configuration. It imports nothing of the executor,
// so it can be built from a file or flags and handed to executor.New:
//
//	p, err := policy.New(
//		policy.WithGlobalMaxInFlight(256),
//		policy.WithDefaultMaxInFlight(64),
//		policy.WithDefaultMaxConcurrency(4),
//	)
//	if err != nil { return err } // an *OptionError names the option and value
//
// Limits are counted in permits: a task of weight w takes w permits at every
// limit it passes. Queue thresholds are counted in tasks, because they bound
// how many waiting tasks are held in memory.
//
// Each per-group limit (MaxInFlight, MaxConcurrency, QueueThreshold) and the
// share is set the same three ways: WithDefault… for every group, WithGroup…
// for one group, With…Resolver through a function of the group key (to read
// it from configuration). For a group, a per-group value wins over the
// resolver, which wins over the default; the global limits are set with
// WithGlobal….
//
// Options are validated once, by New, which names the option and value of the
// first invalid one. An option given twice takes its later value.
//
// The examples (example_test.go, example_rejection_test.go), run by go test,
// show New with its defaults, the OptionError an invalid option gives, a
// resolver, shares, and the rejection policies CallerRuns and DiscardOldest
// at work in an executor.
package policy
