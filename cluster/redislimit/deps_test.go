package redislimit_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The core packages must stay free of Redis: only programs that import this
// package compile go-redis.
func TestCoreDoesNotImportRedis(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("no go command:", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", "../../executor", "../../policy", "../../breaker",
		"../../clock", "../../bulkhead").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "redis") {
			t.Errorf("a core package depends on %s", dep)
		}
	}
}
