package demo_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/groupexec/groupexec/gateway/demo"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The demo shows what it claims: the flood refused, the light tenants all
// served, a table a second.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 2s")
	}
	var out bytes.Buffer
	if err := demo.Run(context.Background(), &out, 2*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"t=1s", "admitted", "rejected", "running", "waiting", "p50", "p99", "alice", "isolation held"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
