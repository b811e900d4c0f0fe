package gateway

import (
	"net/http"
	"strings"
)

// methodOverrides are the headers with which a client asks a backend to
// run another method than the request's: X-HTTP-Method-Override (Symfony
// and Laravel, Rack's MethodOverride, ASP.NET Core, Express's
// method-override, gorilla/handlers, Google's APIs), X-HTTP-Method (OData
// services) and X-Method-Override (some routers). The gateway judges a
// request by every method it may run as: the method it was sent with, and
// each of these.
var methodOverrides = [...]string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override"}

// overrideParam is the query parameter Symfony and Laravel read a method
// override from (as from a form or JSON body, whose fields the gateway
// does not parse: docs/gateway.md says why).
const overrideParam = "_method"

// anyOverride reports whether f holds for a method that the header h or the
// escaped query q asks a backend to run instead of the request's: a
// methodOverrides header in any spelling (a CGI backend reads
// X_HTTP_Method_Override as X-HTTP-Method-Override), or a _method
// parameter as PHP reads its name. The method is passed as sent, blanks
// trimmed; backends upper-case it.
func anyOverride(h http.Header, q string, f func(method string) bool) bool {
	for k, vs := range h {
		if len(k) < len("X-Http-Method") || len(k) > len("X-Http-Method-Override") || !oneOf(k, methodOverrides[:]) {
			continue
		}
		for _, v := range vs {
			if f(strings.TrimSpace(v)) {
				return true
			}
		}
	}
	found := false
	queryParams(q, overrideParam, func(v string) bool {
		found = f(strings.TrimSpace(v))
		return !found
	})
	return found
}

// headMethod reports whether method, an override's, is HEAD, in any case.
func headMethod(method string) bool { return strings.EqualFold(method, http.MethodHead) }

// refusedMethod reports whether method, in any case, is one the gateway
// never proxies: TRACE, TRACK (IIS's TRACE) and CONNECT.
func refusedMethod(method string) bool {
	return strings.EqualFold(method, http.MethodTrace) || strings.EqualFold(method, "TRACK") ||
		strings.EqualFold(method, http.MethodConnect)
}
