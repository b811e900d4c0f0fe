package grpcadmit_test

import (
	"testing"

	"github.com/groupexec/groupexec/internal/adaptertest"
)

// The core packages import only the standard library and this module:
// net/http's helpers, gRPC and OpenTelemetry stay in the adapters.
func TestCoreImportsOnlyTheStandardLibrary(t *testing.T) { adaptertest.CheckCoreDeps(t) }
