package httpadmit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// errUnaskedSwitch is RoundTrip's error for a 101 Switching Protocols that
// switches to another protocol than the request asked for.
var errUnaskedSwitch = errors.New("httpadmit: the destination switched protocols to one the request did not ask for")

// errListedSwitch is RoundTrip's error for a 101 Switching Protocols to one
// of several protocols the request listed, which the Transport does not
// take (switchAsked).
var errListedSwitch = errors.New("httpadmit: the destination switched to one of the protocols the request listed, taken only as the request's Upgrade whole")

// errListedSwitchOutcome is the outcome of such a request for its group:
// Cancelled, not a failure of the destination, which chose as RFC 9110
// section 7.8 lets it, from a list the caller (a client behind a proxy)
// wrote.
var errListedSwitchOutcome = fmt.Errorf("%w: %w", errListedSwitch, context.Canceled)

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

// switchListed reports whether resp, a 101 that switchAsked refuses,
// switches to one of the protocols req lists in its Upgrade.
func switchListed(req *http.Request, resp *http.Response) bool {
	answered := strings.TrimSpace(upgradeOf(resp.Header))
	return answered != "" && upgradeOf(req.Header) != "" &&
		httpguts.HeaderValuesContainsToken(req.Header["Upgrade"], answered)
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
