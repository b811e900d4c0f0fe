package main

import (
	"testing"

	"go.uber.org/goleak"
)

// The example runs under go test: run fails unless every light tenant's
// tasks all succeeded while the flood was refused at its bulkhead, and it
// leaves no goroutine behind.
func TestExample(t *testing.T) {
	defer goleak.VerifyNone(t)
	if err := run(); err != nil {
		t.Fatal(err)
	}
}
