package httpadmit_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/httpadmit"
)

// A next or base that is a nil pointer or function in its interface is
// not nil, so the nil checks let it through, and it failed at every
// request instead: each one admitted, its call panicking, and counted a
// failure of the group, whose breaker it trips. Handler and Transport
// panic at once instead, naming it, as they do for a nil one (Transport's
// nil base means http.DefaultTransport; a nil pointer one is a mistake).
func TestNilPointerNextOrBasePanicsAtConstruction(t *testing.T) {
	ex := newExec(t, nil)
	for name, build := range map[string]func(){
		"Handler":   func() { httpadmit.Handler(ex, http.HandlerFunc(nil)) },
		"Transport": func() { httpadmit.Transport(ex, (*http.Transport)(nil)) },
	} {
		var r any
		func() {
			defer func() { r = recover() }()
			build()
		}()
		if r == nil || !strings.HasPrefix(fmt.Sprint(r), "httpadmit: "+name+": ") {
			t.Errorf("%s with a nil pointer or function: panic %v; want one naming %s", name, r, name)
		}
	}
}
