package gateway

import (
	"fmt"
	"maps"
	"net/url"
	"strings"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/gateway/config"
	"github.com/groupexec/groupexec/policy"
)

// state is what a reload replaces at once: the config and what is built
// from it. A request reads it once, on arrival, and keeps that one, but for
// its group, which it takes under the state in force (groups.acquire).
type state struct {
	cfg      *config.Config
	pol      *policy.Policy
	defaults policy.GroupLimits // an unconfigured tenant's limits
	// changed reports whether defaults differ from the executor's policy
	// (the config the gateway started with): an unconfigured tenant is then
	// given them as it becomes live, and they are dropped when it leaves.
	changed bool
	fixed   map[string]bool // groups whose names the operator chose
	// folded holds fixed's names lower-cased: with tenant.from path, a key
	// that is one of them only in another case is refused (caseTwin).
	folded map[string]bool
	// limited are the groups every reload gives limits to: fixed, and the
	// tenants configured in any config before, the one the gateway started
	// with included. A tenant dropped from the config so gets the
	// unconfigured tenants' limits, which the executor's policy (the
	// starting config's) would not give it.
	limited  map[string]bool
	rates    *rateLimits
	backends []*url.URL
	// tries counts the tries in flight to each backend's address, shared
	// by every state naming it (conns.triesTo).
	tries    []*addrTries
	breakers []*backendBreaker // one per backend, nil unless breaker.per is backend
}

// build makes the state of cfg, reusing prev's breakers and rate buckets
// where their settings are unchanged, so that a reload does not close an
// open breaker or refill a bucket. start is the executor's policy.
func (g *Gateway) build(cfg *config.Config, prev *state, start *policy.Policy) (*state, error) {
	st := &state{cfg: cfg, fixed: map[string]bool{cfg.Tenant.Default: true, OverflowGroup: true}}
	for name := range cfg.Tenants {
		st.fixed[name] = true
	}
	st.folded = make(map[string]bool, len(st.fixed))
	for name := range st.fixed {
		st.folded[strings.ToLower(name)] = true
	}
	st.limited = maps.Clone(st.fixed)
	if prev != nil {
		maps.Copy(st.limited, prev.limited)
	}
	var err error
	if st.pol, err = cfg.Policy(); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	// An unconfigured tenant's limits: a name no config can give a tenant.
	if st.defaults, err = st.pol.Group(OverflowGroup); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	was, err := start.Group(OverflowGroup)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	st.changed = st.defaults != was
	for _, b := range cfg.Backends {
		u, err := url.Parse(b)
		if err != nil {
			return nil, fmt.Errorf("gateway: backend %q: %w", b, err)
		}
		st.backends = append(st.backends, u)
		st.tries = append(st.tries, g.conns.triesTo(u))
	}

	var prevRates *rateLimits
	if prev != nil {
		prevRates = prev.rates
	}
	st.rates = newRateLimits(cfg, prevRates)

	if cfg.Breaker.On() && cfg.Breaker.Per == config.PerBackend {
		// A backend kept, under the same breaker settings, keeps its
		// breaker: adding or removing another does not close it.
		kept := make(map[string][]*backendBreaker)
		if prev != nil && config.SameBreakers(prev.cfg.Breaker, cfg.Breaker) {
			for _, bb := range prev.breakers {
				kept[bb.name] = append(kept[bb.name], bb)
			}
		}
		for _, b := range cfg.Backends {
			if old := kept[b]; len(old) > 0 {
				st.breakers, kept[b] = append(st.breakers, old[0]), old[1:]
				continue
			}
			bb, err := newBackendBreaker(b, cfg.Breaker, g.clk, func(name string, from, to breaker.State) {
				g.log.Warn("backend breaker", "backend", name, "from", from.String(), "to", to.String())
			})
			if err != nil {
				return nil, err
			}
			st.breakers = append(st.breakers, bb)
		}
	}
	return st, nil
}

// caseTwin reports whether key, read from the path, names a configured
// tenant (or the default one) only in another case: "/t/ACME" beside a
// configured "acme". A backend matching paths without regard to case (IIS,
// many Windows and some Java servers) serves acme's path for it, under
// limits that are not acme's: it is refused, as a path a lenient backend
// reads as another tenant's is. An unconfigured key keeps its case, and is
// a tenant of its own. strings.ToLower allocates nothing for a key without
// an upper-case letter.
func (st *state) caseTwin(key string) bool {
	return st.cfg.Tenant.From == config.FromPath && !st.fixed[key] && st.folded[strings.ToLower(key)]
}
