package main

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// The example runs under go test, on a loopback port: run fails unless the
// flood was refused (429) while every light request was served, and says
// so; it leaves no goroutine behind.
func TestExample(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"t=1s", "flood:", "isolation held"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}
}
