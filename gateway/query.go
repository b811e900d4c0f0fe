package gateway

import (
	"net/url"
	"strings"
)

// queryParams calls yield with the value, unescaped, of each parameter of
// the escaped query q whose name PHP reads as name, until yield returns
// false. PHP, which Symfony, Laravel and Phalcon run on, unescapes a name
// ('+' being a blank), drops its leading blanks, reads "a[...]" as a's
// array, and takes a blank or a dot in it for an underscore: " _method",
// ".method", "%5Fmethod" and "_method[]" are all _method. A parameter
// given twice is PHP's last, another framework's first: every one counts.
func queryParams(q, name string, yield func(value string) bool) {
	for q != "" {
		var kv string
		kv, q, _ = strings.Cut(q, "&")
		k, v, _ := strings.Cut(kv, "=")
		if phpName(k) != name {
			continue
		}
		if d, err := url.QueryUnescape(v); err == nil {
			v = d
		}
		if !yield(v) {
			return
		}
	}
}

// phpName returns the escaped query parameter name k as PHP reads it (see
// queryParams).
func phpName(k string) string {
	if strings.ContainsAny(k, "%+") {
		if d, err := url.QueryUnescape(k); err == nil {
			k = d
		}
	}
	k = strings.TrimLeft(k, " ")
	if i := strings.IndexByte(k, '['); i > 0 && strings.IndexByte(k[i:], ']') > 0 {
		k = k[:i] // an array's name
	}
	if strings.ContainsAny(k, " .[") {
		// A '[' without its ']' is an underscore too (the first one only,
		// which is all a name equal to another without '[' can hold).
		k = phpUnderscores.Replace(k)
	}
	return k
}

// phpUnderscores makes the bytes PHP takes for an underscore in a
// parameter's name one. Made once: a replacer is a table of 256 bytes
// and more, and made for each name it cost a query of many short names
// several times the CPU of proxying the request, before its rate limit.
var phpUnderscores = strings.NewReplacer(" ", "_", ".", "_", "[", "_")
