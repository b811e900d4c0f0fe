package gateway

import (
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/groupexec/groupexec/gateway/config"
)

// spoolUse counts the bytes of request bodies held in spool files, in all
// and by client address, for body.spool_max_bytes and
// body.spool_max_bytes_per_client: uncapped, each request may hold up to
// body.max_decoded_bytes there, and one client keeping back the last bytes
// of many bodies could fill the spool's filesystem, after which every
// tenant's spooled bodies fail.
//
// Only bytes written to files count: memory is bounded already, by
// body.buffer_bytes per request being received. A body kept in memory
// neither takes mu nor touches clients.
type spoolUse struct {
	total atomic.Int64 // read without mu by the gauge; changed under mu where a client is counted too

	mu sync.Mutex
	// clients holds each client's bytes; an entry is deleted at 0, so that
	// the map holds only clients with bodies in files, whatever addresses
	// have come and gone.
	clients map[netip.Prefix]int64
}

var (
	errSpoolFull = &bodyError{http.StatusServiceUnavailable, "spool_full", "spool-full",
		"the request bodies held in body.spool_dir are at body.spool_max_bytes"}
	errSpoolSize = &bodyError{http.StatusRequestEntityTooLarge, "body_too_large", "spool-size",
		"the request body is over what body.spool_max_bytes_per_client (or body.spool_max_bytes) lets one body hold in body.spool_dir"}
	errClientSpoolFull = &bodyError{http.StatusServiceUnavailable, "spool_full", "spool-full",
		"this client address's request bodies held in body.spool_dir are at body.spool_max_bytes_per_client"}
)

// reserve counts n more bytes of client's (if counted) against lim's caps,
// or counts nothing and returns the cap it would pass.
func (u *spoolUse) reserve(n int64, lim *config.Body, client netip.Prefix, counted bool) error {
	if !counted {
		return u.reserveTotal(n, lim.SpoolMaxBytes)
	}
	// Both under mu: a reservation the client's share refuses must not
	// hold room in the total meanwhile, nor one the total refuses in the
	// share.
	u.mu.Lock()
	defer u.mu.Unlock()
	have := u.clients[client]
	if n > lim.SpoolMaxBytesPerClient-have {
		return errClientSpoolFull
	}
	if err := u.reserveTotal(n, lim.SpoolMaxBytes); err != nil {
		return err
	}
	if u.clients == nil {
		u.clients = make(map[netip.Prefix]int64)
	}
	u.clients[client] = have + n
	return nil
}

// reserveTotal counts n more bytes against max, unless they would pass it.
// Written as max-used, the comparison cannot overflow.
func (u *spoolUse) reserveTotal(n, max int64) error {
	for {
		used := u.total.Load()
		if n > max-used {
			return errSpoolFull
		}
		if u.total.CompareAndSwap(used, used+n) {
			return nil
		}
	}
}

// giveBack uncounts n bytes that reserve counted.
func (u *spoolUse) giveBack(n int64, client netip.Prefix, counted bool) {
	if !counted {
		u.total.Add(-n)
		return
	}
	u.mu.Lock()
	u.total.Add(-n)
	if left := u.clients[client] - n; left > 0 {
		u.clients[client] = left
	} else {
		delete(u.clients, client)
	}
	u.mu.Unlock()
}

// spoolClient returns the client r's spooled bytes count against: its
// connection's peer as max_conns_per_client counts it (clientPrefix).
// counted is false for a peer without an IP address, or one of
// tenant.trusted_proxies, whose bodies are many clients': they count
// against the total only.
func spoolClient(t *config.Tenant, r *http.Request) (client netip.Prefix, counted bool) {
	a := peer(r).Unmap()
	if carriesMany(t, a) {
		return netip.Prefix{}, false
	}
	return clientPrefix(a)
}

// carriesMany reports whether a is a trusted proxy's address: its
// connections carry many clients, and a cap per client is the proxy's to
// apply. With no trusted_proxies every address is trusted to name its
// tenant, but each is still one client.
func carriesMany(t *config.Tenant, a netip.Addr) bool {
	return len(t.TrustedProxies) > 0 && t.Trusts(a)
}

// clientPrefix returns the client a (unmapped) is: the address itself for
// IPv4, its /64 for IPv6, which one host is given whole and can pick any
// address in. ok is false for the zero Addr.
func clientPrefix(a netip.Addr) (client netip.Prefix, ok bool) {
	if !a.IsValid() {
		return netip.Prefix{}, false
	}
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p, true
}
