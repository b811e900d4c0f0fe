package redislimit_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(childMain(mode)) // this test binary re-executed as a holder process
	}
	goleak.VerifyTestMain(m)
}
