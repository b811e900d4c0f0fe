// Package benchmarks measures the grouped executor against peer worker pools
// (ants, pond, golang.org/x/sync/semaphore and a hand-written fixed pool).
//
// It is its own module so that the peers never enter the main go.mod. All the
// code is in _test.go files; see README.md for how to run it and for the
// measured numbers.
package benchmarks
