package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// refusal is the JSON body of every answer the gateway gives itself.
type refusal struct {
	Error  string `json:"error"`            // a stable code: rejected, breaker_open, draining, ...
	Reason string `json:"reason"`           // for people
	Tenant string `json:"tenant,omitempty"` // the group the request ran in
}

// refuse answers for the gateway: code with a small JSON body naming x's
// group and, when retryAfter > 0, a Retry-After in whole seconds (at least
// 1). w is the client's writer, or x's response inside the proxy call.
func (g *Gateway) refuse(w http.ResponseWriter, x *exchange, code int, errCode, reason string, retryAfter time.Duration) {
	x.code = code
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64(wholeSeconds(retryAfter)), 10))
	}
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(refusal{Error: errCode, Reason: reason, Tenant: x.group})
}

// wholeSeconds is d in whole seconds, rounded up, at least 1: rounded
// without adding to d, which the largest Duration (a rate limiter's
// "never") would overflow.
func wholeSeconds(d time.Duration) time.Duration {
	s := d / time.Second
	if d%time.Second > 0 {
		s++
	}
	return max(s, 1)
}
