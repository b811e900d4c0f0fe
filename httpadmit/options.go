package httpadmit

import (
	"fmt"
	"net/http"
	"reflect"
	"time"

	"github.com/groupexec/groupexec/internal/adapt"
)

// DefaultRetryAfter is the Retry-After the default refusal writer sends.
const DefaultRetryAfter = time.Second

// An Option configures Handler or Transport. Handler and Transport panic on
// an invalid option, with a message naming the option and the value, as
// http.ServeMux does on an invalid pattern: options are fixed when a program
// is written, so an invalid one is a bug to see at once.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	tenant       tenantFunc // nil: the side's default (header, or destination host)
	defaultGroup string
	retryAfter   time.Duration
	refuse       func(http.ResponseWriter, *http.Request, error)
	failure      func(status int) bool
	weight       func(*http.Request) (int, error) // nil: every request weighs 1
}

// build applies opts over the defaults; the last tenant option wins.
func build(opts []Option) config {
	c := config{defaultGroup: DefaultGroup, retryAfter: DefaultRetryAfter}
	adapt.Apply("httpadmit", &c, opts, Option.apply)
	return c
}

// WithTenantHeader reads the tenant from the named header instead of
// X-Tenant. An absent header names no tenant (the default group); a header
// sent more than once, or empty, makes the request invalid (400). name must
// be a valid header name (a token: no spaces, no colon), and not Host or
// Transfer-Encoding, which net/http keeps out of Request.Header
// (WithTenantHost reads the host).
//
// The header is read under its one name: "X_Tenant" is another header to
// net/http, and Handler neither reads nor drops it. A program that reads
// headers as CGI variables (net/http/cgi, a PHP, WSGI or Rack backend
// that next proxies to) takes "X-Tenant" and "X_Tenant" for one variable,
// HTTP_X_TENANT, and may read the one a client added: such a next sets
// the header from the group the request was admitted under
// (executor.GroupFromContext) and deletes its underscore spellings before
// passing the request on.
func WithTenantHeader(name string) Option {
	return optionFunc(func(c *config) error {
		if err := adapt.HeaderName(name); err != nil {
			return err
		}
		c.tenant = fromHeader(name)
		return nil
	})
}

// WithTenantHost reads the tenant from the request's Host, lower-cased and
// without its port or trailing dots (an IPv6 address in its canonical
// form, an IPv4-mapped one as its IPv4 address, an internationalized name
// in its ASCII form, as net/http sends it): one group per virtual host,
// however a client spells it. For a Transport, the Host of an outgoing
// request whose Host is empty is its URL's, as net/http sends it. Like every tenant key it is at most 128
// bytes: a host name longer than that (DNS allows 253) makes the request
// invalid (400); read such hosts with WithTenantFunc, mapping them to
// shorter keys. So does a port that is not a number
// ("acme.example:1,victim.example", which net/http takes): a proxy in next
// would pass the Host whole in X-Forwarded-Host, where a backend taking
// the last host of a list serves another host than the group's. So does a
// colon that is neither an IPv6 address's nor the port's
// ("acme.example:1:2", which net/http takes too, and a backend reading the
// host up to its first colon serves as acme.example).
func WithTenantHost() Option {
	return optionFunc(func(c *config) error {
		c.tenant = fromHost
		return nil
	})
}

// WithTenantPathSegment reads the tenant from the i-th segment of the URL
// path, 0 being the first: WithTenantPathSegment(1) reads "acme" from
// "/t/acme/orders". A missing or empty segment names no tenant. i must be
// >= 0.
//
// The path is split as sent and the segment decoded after the split, as
// http.ServeMux matches its patterns ("/t/%61cme/x" is "acme"). A path with
// an escaped slash ("%2F") in or before the tenant's segment is an invalid
// tenant (400): the mux would route "/t/ac%2Fme/x" to "/t/{tenant}/x" as
// tenant "ac/me", and a handler splitting the decoded path would see "ac",
// so no key would be the tenant every reader sees.
//
// Dot segments and repeated slashes are read as sent too, not cleaned:
// "/t/acme/../globex/x" is admitted as "acme", "/t//acme/x" in the
// default group. http.ServeMux serves no such path: it redirects the
// client to the clean one ("/t/globex/x"), which is admitted as its own
// tenant. A router that cleans the path and serves it at once would serve
// globex's route admitted as acme; behind such a router, read the tenant
// from the cleaned path with WithTenantFunc. The query is never read.
func WithTenantPathSegment(i int) Option {
	return optionFunc(func(c *config) error {
		if i < 0 {
			return fmt.Errorf("WithTenantPathSegment(%d): the index must be >= 0", i)
		}
		c.tenant = fromPathSegment(i)
		return nil
	})
}

// WithTenantContextValue reads the tenant from the request context's value
// for key, a string set by a middleware that runs before (typically the one
// that authenticates the caller). No value names no tenant; a value that is
// not a string makes the request invalid. key must be comparable and not nil,
// as for context.WithValue.
func WithTenantContextValue(key any) Option {
	return optionFunc(func(c *config) error {
		if key == nil {
			return fmt.Errorf("WithTenantContextValue(nil): the key must not be nil")
		}
		// The value, not only its type: a struct or array type holding an
		// interface is comparable, but comparing one that holds a slice
		// panics, and the lookup of every request would, meeting the
		// middleware's key, which is the same.
		if !reflect.ValueOf(key).Comparable() {
			return fmt.Errorf("WithTenantContextValue(%T): the key must be comparable", key)
		}
		c.tenant = fromContext(key)
		return nil
	})
}

// WithTenantFunc reads the tenant with f: "" names no tenant, an error makes
// the request invalid (400), and a key must pass ValidTenant. An error
// matching ErrUnavailable says that f could not read the tenant through
// no fault of the request's (a lookup it needs failed): 503 with
// Retry-After, its text kept in the server. f runs for every
// request, possibly concurrently. Use it to map keys chosen by clients to a
// bounded set. The default refusal writer sends the error's text to the
// client in its 400 answer: keep internal details (a lookup's address, a
// database's message) out of it, or answer with WithRefusalWriter, which
// gets the error. f must not be nil.
//
// f runs before the request is admitted. One that reads a form value
// (r.FormValue, r.ParseForm) reads the body then, up to 10 MB at the
// client's pace, outside every limit, and takes the key from the query or
// the body, wherever the client put it. One that reads a credential must
// read the one the server's authentication checks: a key taken from
// Authorization, where the authentication also accepts an access_token
// query parameter, is the client's choice. Read the tenant the
// authentication verified (WithTenantContextValue).
func WithTenantFunc(f func(r *http.Request) (string, error)) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return adapt.NilFunc("WithTenantFunc")
		}
		c.tenant = fromFunc(f)
		return nil
	})
}

// WithDefaultGroup sets the group of the requests that name no tenant
// (default DefaultGroup). It must pass ValidTenant. A client can name it as
// its tenant, which is the same as naming none.
func WithDefaultGroup(group string) Option {
	return optionFunc(func(c *config) error {
		if err := adapt.DefaultGroup(group); err != nil {
			return err
		}
		c.defaultGroup = group
		return nil
	})
}

// WithRetryAfter sets the Retry-After of the default refusal writer's 429 and
// 503 answers, rounded up to whole seconds (default DefaultRetryAfter). d
// must be > 0.
func WithRetryAfter(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if err := adapt.RetryAfter(d); err != nil {
			return err
		}
		c.retryAfter = d
		return nil
	})
}

// WithRefusalWriter makes Handler answer the requests it does not pass to
// next with f instead of the default writer. err is what refused the
// request: it matches ErrInvalidTenant, ErrInvalidWeight, ErrUnavailable,
// executor.ErrRejected (and its causes: executor.ErrShutdown,
// breaker.ErrOpenState, ...), or is the request context's error. RefusalStatus gives the status the default writer uses.
// Transport has no answer to write and ignores it. f must not be nil.
func WithRefusalWriter(f func(w http.ResponseWriter, r *http.Request, err error)) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return adapt.NilFunc("WithRefusalWriter")
		}
		c.refuse = f
		return nil
	})
}

// WithFailureStatus makes the responses whose status f reports as a failure
// count as failed work: in the executor's Stats and listener, and in the
// group's circuit breaker (executor.WithGroupBreaker), which opens after
// enough of them. Without it only a panic (Handler) or a transport error
// (Transport) counts as a failure. A typical f is
// func(code int) bool { return code >= 500 }. In Handler, a failing status
// written after the request's context was cancelled (its client went away,
// or the executor stopped it) counts as Cancelled, not as a failure: it
// answers for work given up on, as a ReverseProxy's 502 for an upstream call
// cancelled with its client's request does; so does a response next wrote
// nothing of, returning once the request's context was cancelled (net/http's
// 200 then goes to no one). A Handler chained before
// another (one group per tenant, then one per route) counts a request the
// inner one refused as Cancelled, whatever the refusal's status, and f
// does not see it: next never ran, and an inner group's open breaker or
// shutdown (503) must not open the outer group's. A status next writes after
// hijacking the connection, which net/http drops, is not judged. The inner Handler finds
// the outer one's writer through Unwrap: a middleware between the two must
// keep it reachable, as http.ResponseController asks.
//
// Handler then passes next a ResponseWriter that records the status. It
// implements http.Flusher (http.ResponseController's Flush returns the
// server's writer's error), http.Pusher (Push returns http.ErrNotSupported
// where the server's writer cannot push, over HTTP/1), io.ReaderFrom
// (io.Copy of a file reaches the server's writer's, which uses
// sendfile(2)), io.StringWriter (io.WriteString reaches the server's
// writer's without copying the string) and Unwrap (so http.ResponseController reaches the server's
// writer for hijacking, deadlines and flushes), but not http.Hijacker
// directly: a handler that type-asserts it should use
// http.NewResponseController instead. f must not be nil.
func WithFailureStatus(f func(status int) bool) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return adapt.NilFunc("WithFailureStatus")
		}
		c.failure = f
		return nil
	})
}

// WithWeightFunc gives each request the weight f returns: the request takes
// that many permits at every limit of its group and the executor
// (Executor.DoWeighted), so an expensive request counts for more than a
// cheap one. f runs for every request, after its tenant is read, possibly
// concurrently. Without it every request weighs 1.
//
// 0 means 1, as for DoWeighted. An error from f, or a negative weight,
// makes the request invalid: it never reaches the executor, its error
// matches ErrInvalidWeight, and Handler answers 400 (Transport returns the
// error); an error matching ErrUnavailable, the server's failure, is
// answered 503 with Retry-After instead, as for WithTenantFunc. A weight above a limit the request must pass can never run: the
// executor refuses it with executor.ErrTooHeavy, which Handler answers 413
// without Retry-After, since waiting would not help. The default refusal
// writer sends the text of f's error to the client in its 400 answer, as
// for WithTenantFunc. f must not be nil. f reads the request as sent: a
// method override honoured behind Handler (a _method form field or an
// X-HTTP-Method-Override header turning a POST into a DELETE) serves a
// method other than the r.Method f weighed.
func WithWeightFunc(f func(r *http.Request) (int, error)) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return adapt.NilFunc("WithWeightFunc")
		}
		c.weight = f
		return nil
	})
}
