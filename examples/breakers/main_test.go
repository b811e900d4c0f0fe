package main

import (
	"testing"

	"go.uber.org/goleak"
)

// The example runs under go test, on its fake clock: main checks each
// round's outcome (a failed check exits the test binary with status 1),
// and it leaves no goroutine behind.
func TestExample(t *testing.T) {
	defer goleak.VerifyNone(t)
	main()
}
