package httpadmit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
)

// A handler that panics after its response's status went out failed, and
// counts so against its group's breaker, whatever that status was: the
// status answered for a response the panic then cut short. Judged by its
// 200, the panic would count as a success and close a half-open breaker.
// An abort (http.ErrAbortHandler) after the status is still Cancelled.
func TestHandlerPanicAfterTheStatusIsJudgedByThePanic(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value any
		want  executor.Status
	}{{"panic", "boom", executor.Failed}, {"abort", http.ErrAbortHandler, executor.Cancelled}} {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEvents()
			ex := newExec(t, nil, ev.listener(), executor.WithGroupBreaker(breaker.Settings{
				ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 }}))
			h := httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusOK)
				w.Write([]byte("partial"))
				panic(tc.value)
			}), httpadmit.WithFailureStatus(func(code int) bool { return code >= 500 }),
				httpadmit.WithTenantFunc(func(*http.Request) (string, error) { return "a", nil }))
			if v := servePanic(h, httptest.NewRecorder()); v != tc.value {
				t.Fatalf("ServeHTTP's panic = %v, want %v", v, tc.value)
			}
			if e := next(t, ev.completed); e.Status != tc.want {
				t.Errorf("the request ended %v (%v), want %v", e.Status, e.Err, tc.want)
			}
			s, _ := ex.GroupStats("a")
			if wantOpen := tc.want == executor.Failed; (s.Breaker == breaker.StateOpen) != wantOpen || s.Running != 0 {
				t.Errorf("breaker %v, %d running; want open: %v, none running", s.Breaker, s.Running, wantOpen)
			}
		})
	}
}
