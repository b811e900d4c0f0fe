// Package policy holds the limits a grouped executor enforces: how much work may
// run at once across all groups, how much one group may have admitted and
// running, how long work may wait, and what happens to work that does not fit.
//
// A Policy is pure, immutable configuration. It imports nothing of the executor,
// so it can be built from a file or flags and handed to executor.New:
//
//	p, err := policy.New(
//		policy.WithGlobalMaxInFlight(256),
//		policy.WithMaxInFlightPerGroup(64),
//		policy.WithMaxConcurrencyPerGroup(4),
//	)
//
// Limits are counted in permits: a task of weight w takes w permits at every
// limit it passes. Queue thresholds are counted in tasks, because they bound
// how many waiting tasks are held in memory.
//
// Options are validated once, by New, which names the option and value of the
// first invalid one. An option given twice takes its later value.
package policy
