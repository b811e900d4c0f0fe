package benchmarks

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any goroutine outlives the tests or benchmarks.
// IgnoreCurrent skips only what package initialisation started before
// TestMain: ants creates its default pool (a purge and a ticktock goroutine)
// in an init.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}
