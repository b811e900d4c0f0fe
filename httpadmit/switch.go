package httpadmit

import (
	"errors"
	"net/http"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// errUnaskedSwitch is RoundTrip's error for a 101 Switching Protocols that
// switches to a protocol the request did not ask for.
var errUnaskedSwitch = errors.New("httpadmit: the destination switched protocols to one the request did not ask for")

// switchAsked reports whether resp, a 101, switches to a protocol req asked
// for: req names the "upgrade" option in Connection and lists, in Upgrade,
// the protocol resp names (printable ASCII, compared in any case). RFC 9110
// section 7.8 has a server switch only to one of those. Any other switch
// is the destination's failure, not a connection for the caller: a caller
// that refuses it may leave its body open (httputil.ReverseProxy does), and
// the slot, held until that body is closed, would never be freed.
func switchAsked(req *http.Request, resp *http.Response) bool {
	proto := strings.TrimSpace(resp.Header.Get("Upgrade"))
	if proto == "" || strings.IndexFunc(proto, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0 {
		return false
	}
	return httpguts.HeaderValuesContainsToken(req.Header["Connection"], "upgrade") &&
		httpguts.HeaderValuesContainsToken(req.Header["Upgrade"], proto)
}
