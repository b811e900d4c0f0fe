package gateway_test

import (
	"testing"

	"go.uber.org/goleak"
)

// net/http lingers 500ms after answering a request it did not read (431,
// 413) so that the client can read the answer before the reset; that
// goroutine ends by itself and is not the gateway's.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("net/http.(*conn).closeWriteAndWait"))
}
