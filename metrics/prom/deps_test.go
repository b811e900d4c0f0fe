package prom_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The core packages must stay free of Prometheus: only programs that import
// this package should compile it.
func TestCoreDoesNotImportPrometheus(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("no go command:", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", "../../executor", "../../policy", "../../breaker", "../../bulkhead", "../../outcome", "../../clock", "../../internal/...", "../../cluster/redislimit").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "prometheus") || strings.Contains(dep, "yaml") {
			t.Errorf("a core package depends on %s", dep)
		}
	}
}
