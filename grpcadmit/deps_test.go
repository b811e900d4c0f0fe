package grpcadmit_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The core packages import only the standard library and this module:
// net/http's helpers, gRPC and OpenTelemetry stay in the adapters.
func TestCoreImportsOnlyTheStandardLibrary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}",
		"../executor", "../policy", "../bulkhead", "../breaker").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if !strings.HasPrefix(dep, "github.com/groupexec/groupexec/") {
			t.Errorf("a core package depends on %s", dep)
		}
	}
}
