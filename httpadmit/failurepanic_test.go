package httpadmit_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/internal/adaptertest"
	"github.com/groupexec/groupexec/policy"
)

// A panic in WithFailureStatus's function, as it judges the status of a
// response next wrote without WriteHeader once next has returned, goes on
// to the server as one in next does, whether the request was admitted or
// a rejection handler ran it in its caller (Rejection.RunInCaller), which
// recovers what fn raises into a *executor.PanicError: the request was
// judged by nobody, and its panic must not vanish.
func TestHandlerFailureStatusPanicGoesOn(t *testing.T) {
	for _, inCaller := range []bool{false, true} {
		t.Run(map[bool]string{false: "admitted", true: "run in caller"}[inCaller], func(t *testing.T) {
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)})
			if inCaller {
				ex = runInCallerExec(t)
				defer adaptertest.FillSlot(t, ex, "a")()
			}
			h := httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, "ok") // a 200 that next never wrote with WriteHeader
			}), httpadmit.WithTenantFunc(func(*http.Request) (string, error) { return "a", nil }),
				httpadmit.WithFailureStatus(func(int) bool { panic("judge broke") }))
			if v := servePanic(h, httptest.NewRecorder()); v != "judge broke" {
				t.Errorf("ServeHTTP's panic = %v, want the WithFailureStatus function's", v)
			}
		})
	}
}
