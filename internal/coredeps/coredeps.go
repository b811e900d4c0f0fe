// Package coredeps is the check each adapter's tests make that the core
// packages import only the standard library and this module, so that
// net/http's test helpers, gRPC and OpenTelemetry stay in the adapters.
package coredeps

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/groupexec/groupexec/"

// Core are the packages that must import only the standard library and
// this module.
var Core = []string{module + "executor", module + "policy", module + "bulkhead", module + "breaker", module + "internal/..."}

// Check fails t for every package outside the standard library and this
// module that a core package depends on.
func Check(t *testing.T) {
	t.Helper()
	args := append([]string{"list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}"}, Core...)
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if !strings.HasPrefix(dep, module) {
			t.Errorf("a core package depends on %s", dep)
		}
	}
}
