package httpadmit

import (
	"errors"
	"net/http"

	"golang.org/x/net/http/httpguts"
)

// errUnaskedSwitch is RoundTrip's error for a 101 Switching Protocols that
// switches to another protocol than the request asked for.
var errUnaskedSwitch = errors.New("httpadmit: the destination switched protocols to one the request did not ask for")

// switchAsked reports whether resp, a 101, switches to the protocol req
// asked for: both name the "upgrade" option in Connection, and resp's
// Upgrade, in printable ASCII, is req's in any case. RFC 9110 section 7.8
// has a server switch only to a protocol the request lists. Any other
// switch is the destination's failure, not a connection for the caller:
// httputil.ReverseProxy refuses it without closing its body, and the slot,
// held until that body is closed, would never be freed. A request listing
// several protocols is held to ReverseProxy's rule for the same reason: the
// switch is taken only to its Upgrade as a whole, where ReverseProxy would
// refuse a switch to one protocol of the list.
func switchAsked(req *http.Request, resp *http.Response) bool {
	asked, answered := upgradeOf(req.Header), upgradeOf(resp.Header)
	if answered == "" || len(asked) != len(answered) {
		return false
	}
	for i := range len(answered) {
		a, b := asked[i], answered[i]
		if b < 0x20 || b > 0x7e || lower(a) != lower(b) {
			return false
		}
	}
	return true
}

// upgradeOf is the protocol h switches to, or asks to: its Upgrade, when
// its Connection names the "upgrade" option; else "".
func upgradeOf(h http.Header) string {
	if !httpguts.HeaderValuesContainsToken(h["Connection"], "upgrade") {
		return ""
	}
	return h.Get("Upgrade")
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
