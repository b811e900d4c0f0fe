package httpadmit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/policy"
)

// A panic in the tenant function, the weight function or the refusal
// writer goes on to the server with its own value, and holds no slot: the
// first two run before the request is admitted, the writer after.
func TestHandlerCallbackPanicsHoldNoSlot(t *testing.T) {
	boom := func(*http.Request) (int, error) { panic("weight") }
	for name, opts := range map[string][]httpadmit.Option{
		"tenant": {httpadmit.WithTenantFunc(func(*http.Request) (string, error) { panic("tenant") })},
		"weight": {httpadmit.WithWeightFunc(boom)},
		"refusal writer": {httpadmit.WithTenantFunc(func(*http.Request) (string, error) { return "a b", nil }),
			httpadmit.WithRefusalWriter(func(http.ResponseWriter, *http.Request, error) { panic("refusal writer") })},
	} {
		t.Run(name, func(t *testing.T) {
			ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(1)})
			served := false
			h := httpadmit.Handler(ex, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served = true }), opts...)
			rec := httptest.NewRecorder()
			if v := servePanic(h, rec); v != name {
				t.Fatalf("ServeHTTP's panic = %v, want %q", v, name)
			}
			if served || rec.Body.Len() != 0 {
				t.Errorf("served %v, body %q: want nothing", served, rec.Body)
			}
			if s := ex.Stats(); s.Running != 0 || s.Waiting != 0 {
				t.Errorf("%+v: a slot is held after the panic", s)
			}
		})
	}
}
