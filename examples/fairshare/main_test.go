package main

import (
	"testing"

	"go.uber.org/goleak"
)

// The example runs under go test: the split follows the shares (run checks
// it), and it leaves no goroutine behind.
func TestExample(t *testing.T) {
	defer goleak.VerifyNone(t)
	if err := run(); err != nil {
		t.Fatal(err)
	}
}
