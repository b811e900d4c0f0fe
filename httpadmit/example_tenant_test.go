package httpadmit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/policy"
)

// The tenant can come from a path segment rather than a header: here the
// second, as in /t/{tenant}/.... The handler reads the group the request
// was admitted under from its context; a path naming no tenant runs in the
// default group, and an invalid key is refused with 400 before it is
// admitted.
func ExampleWithTenantPathSegment() {
	p, _ := policy.New()
	ex, _ := executor.New(p)
	defer ex.Close()

	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		group, _ := executor.GroupFromContext(r.Context())
		fmt.Fprintf(w, "served for %s", group)
	})
	h := httpadmit.Handler(ex, api, httpadmit.WithTenantPathSegment(1))

	for _, path := range []string{"/t/acme/orders", "/t/%61cme/orders", "/health", "/t/ac%2Fme/orders"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		fmt.Printf("%s: %d %s\n", path, rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	// Output:
	// /t/acme/orders: 200 served for acme
	// /t/%61cme/orders: 200 served for acme
	// /health: 200 served for default
	// /t/ac%2Fme/orders: 400 httpadmit: invalid tenant: an escaped slash in or before path segment 1
}
