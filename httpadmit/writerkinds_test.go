package httpadmit_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/groupexec/groupexec/httpadmit"
)

// writerKind is a way Handler can pass next its writer: the server's own
// (no option needs to see the status), or a writer recording the status
// (WithFailureStatus). What next relies on must work through both.
type writerKind struct {
	name string
	opts []httpadmit.Option
}

var writerKinds = []writerKind{
	{"server's writer", nil},
	{"status recorded", []httpadmit.Option{httpadmit.WithFailureStatus(func(code int) bool { return code >= 500 })}},
}

// hangGuard bounds a wait that only a broken feature would make endless
// (a flush that never reaches the client, a response that never comes): it
// turns the hang into a failure, and never paces a passing run.
const hangGuard = 30 * time.Second

// guarded is the test's context, ended by hangGuard too.
func guarded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

// clientRequest is a request of tenant a to url, for a client to send.
func clientRequest(t *testing.T, ctx context.Context, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Tenant", "a")
	return req
}
