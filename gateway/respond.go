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

// refuse writes code with a small JSON body and, when retryAfter > 0, a
// Retry-After in whole seconds (at least 1).
func (g *Gateway) refuse(w http.ResponseWriter, code int, errCode, reason, tenant string, retryAfter time.Duration) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int(max(1, (retryAfter+time.Second-1)/time.Second))))
	}
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(refusal{Error: errCode, Reason: reason, Tenant: tenant})
}
