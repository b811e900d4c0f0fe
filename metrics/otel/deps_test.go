package otel_test

import (
	"testing"

	"github.com/groupexec/groupexec/internal/coredeps"
)

// The core packages import only the standard library and this module:
// net/http's helpers, gRPC and OpenTelemetry stay in the adapters.
func TestCoreImportsOnlyTheStandardLibrary(t *testing.T) { coredeps.Check(t) }
