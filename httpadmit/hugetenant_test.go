package httpadmit_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/policy"
)

// A 64 KiB tenant header, well within the server's header limit, is
// refused with 400 before admission: it takes no capacity, even while
// another tenant holds all of it, and the refusal quotes only the value's
// first 128 bytes (MaxTenantLen), then how many more there were, not the
// 64 KiB a client sent.
func TestHandlerHugeTenantRefusedWithABoundedQuote(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(1)})
	g := newGate(t)
	srv := serve(t, httpadmit.Handler(ex, g))
	huge := make([]byte, 64<<10)
	for i := range huge {
		huge[i] = '!' + byte(i%94) // printable, and each prefix its own
	}
	value := string(huge)

	held := make(chan int)
	go func() { code, _, _ := mustGet(t, srv.URL, "b"); held <- code }()
	<-g.entered // b holds the executor's one slot

	code, ra, body := mustGet(t, srv.URL, value)
	if code != http.StatusBadRequest || ra != "" {
		t.Fatalf("%d Retry-After %q, want 400 without", code, ra)
	}
	if want := strconv.Quote(value[:128]) + "... (65408 more bytes)"; !strings.Contains(body, want) {
		t.Errorf("the refusal is %q; want it to quote the first 128 bytes, then say how many more there were", body)
	}
	if len(body) > 512 {
		t.Errorf("the refusal is %d bytes long", len(body))
	}

	g.release()
	if code := <-held; code != http.StatusOK {
		t.Errorf("b: %d, want 200", code)
	}
	if code, _, _ := mustGet(t, srv.URL, "c"); code != http.StatusOK {
		t.Errorf("c after the refusal: %d, want 200", code)
	}
	if s := ex.Stats(); s.Submitted != 2 || s.Rejected != 0 || s.Succeeded != 2 {
		t.Errorf("%+v: want b's and c's requests alone submitted and served", s.TaskCounts)
	}
}
