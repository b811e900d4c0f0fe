package gateway

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/groupexec/groupexec/gateway/config"
	"github.com/groupexec/groupexec/policy"
)

// reloader serialises reloads and knows the file to read.
type reloader struct {
	mu     sync.Mutex
	path   string // WithConfigFile's
	closed bool   // set by Close: every reload from then on is refused
	// limitsSet, if not nil, is called by Reload once the executor has the
	// new limits (tests).
	limitsSet func()
	// fileRead, if not nil, is called by ReloadFile once it has read the
	// file (tests).
	fileRead func()
	// configRead, if not nil, is called by Serve once it has read the
	// config it starts with, before its listener is in place (tests).
	configRead func()
}

// WithConfigFile names the file the gateway's config came from, for
// ReloadFile (SIGHUP in the groupexec command, POST /reload).
func WithConfigFile(path string) Option { return func(g *Gateway) { g.reload.path = path } }

// ErrNoConfigFile is ReloadFile's error when the gateway was not given
// WithConfigFile.
var ErrNoConfigFile = errors.New("gateway: no config file to reload (WithConfigFile)")

// ReloadFile reads WithConfigFile's file again and applies it with Reload.
// The file is read with config.LoadRegular: a path that is not a regular
// file (a named pipe, a device) is refused at once, never waited on.
// Without WithConfigFile it returns ErrNoConfigFile, and after Close
// ErrClosed, each counted as a refused reload: whoever asked for one is told, by the metric too, that the
// config in force was not reloaded. Reloads run one at a time, each
// reading the file once the one before has been applied, so that the
// last one applies the file as it was last written.
func (g *Gateway) ReloadFile() error {
	// The file is read under the lock too: read before it, a file read
	// first could be applied after a newer one that another reload (a
	// SIGHUP beside a POST /reload) read later, undoing it.
	g.reload.mu.Lock()
	defer g.reload.mu.Unlock()
	if g.reload.closed {
		g.m.reloads.WithLabelValues("error").Inc()
		return ErrClosed
	}
	if g.reload.path == "" {
		g.m.reloads.WithLabelValues("error").Inc()
		return ErrNoConfigFile
	}
	// A regular file only: a named pipe or a device there would keep this
	// reload waiting for good, under the lock, and Close behind it.
	cfg, err := config.LoadRegular(g.reload.path)
	if g.reload.fileRead != nil {
		g.reload.fileRead()
	}
	if err != nil {
		g.m.reloads.WithLabelValues("error").Inc()
		return err
	}
	return g.reloadLocked(cfg)
}

// Reload applies cfg in place, without dropping a connection or a request:
// the limits, tenants, shares, rate limits, breaker settings, backends,
// timeouts, body and response sizes and the spool caps, trust settings,
// max_conns, max_conns_per_client, admin_max_conns and drain
// settings. Limits change through the executor's runtime API
// (SetGlobalMaxInFlight, SetGroupLimits): raising one admits waiting
// requests at once, lowering one lets running requests finish and admits
// nothing new until under it. Requests already in the gateway finish under
// the config they arrived with, but one that has not taken its tenant's
// group yet takes it under cfg, whose limits the executor applies: a tenant
// cfg removes is counted as an unconfigured one. A rate bucket or breaker
// whose settings are unchanged keeps its state; a changed one starts afresh
// (full, closed).
//
// If cfg changes a key that needs a restart (config.Config.RestartOnly),
// Reload changes nothing and returns every such problem (matching
// config.ErrInvalid, in line order). So it does if cfg cannot be built or
// gives a group limits the executor would refuse: every limit is checked
// before the first is set. Once Close has been called it changes nothing
// and returns ErrClosed; a reload under way when Close is called ends
// before Close goes on.
func (g *Gateway) Reload(cfg *config.Config) error {
	g.reload.mu.Lock()
	defer g.reload.mu.Unlock()
	return g.reloadLocked(cfg)
}

// reloadLocked is Reload, with reload.mu held.
func (g *Gateway) reloadLocked(cfg *config.Config) (err error) {
	defer func() {
		result := "ok"
		if err != nil {
			result = "error"
		}
		g.m.reloads.WithLabelValues(result).Inc()
	}()
	if g.reload.closed {
		return ErrClosed
	}
	prev := g.state.Load()
	if errs := cfg.RestartOnly(prev.cfg); len(errs) > 0 {
		return config.JoinErrors(errs)
	}
	st, err := g.build(cfg, prev, g.ex.Policy())
	if err != nil {
		return err
	}
	// Every group's limits are worked out and checked before any is set:
	// setting them one by one, a refusal halfway would leave the executor
	// with part of the new limits under the old config.
	limits, err := g.groupLimits(st)
	if err != nil {
		return fmt.Errorf("gateway: reload: %w", err)
	}
	// The groups before the executor's limits: from here a tenant st
	// configures is no longer one whose unconfigured limits its last
	// request drops as it leaves (groups.release), which would drop the
	// limits applyLimits gives it. Then the executor, before the state, so
	// that no request admitted under the new state runs under the old
	// limits for long; a request that reads the new state before its
	// group's limits are set runs under the old ones, which is what it
	// would have got a moment earlier.
	g.groups.reload(st)
	if err := g.applyLimits(st, limits); err != nil {
		g.groups.reload(prev)
		return fmt.Errorf("gateway: reload: %w", err)
	}
	if g.reload.limitsSet != nil {
		g.reload.limitsSet()
	}
	st.rates.commit(g.clk.Now())
	g.state.Store(st)
	// After the store: a request reading the state from here sends
	// nothing to a backend st removed, and the connections to one are
	// closed as soon as the requests that set out before are done.
	g.conns.retire(st.backends)
	if l := g.clients.Load(); l != nil {
		l.setMax(cfg.MaxConns)
		l.setPerClient(cfg.MaxConnsPerClient)
		if !slices.Equal(prev.cfg.Tenant.TrustedProxies, cfg.Tenant.TrustedProxies) {
			l.rejudge()
		}
	}
	if l := g.admins.Load(); l != nil {
		l.setMax(cfg.AdminMaxConns)
		l.setPerClient(adminPerClient(cfg.AdminMaxConns))
	}
	g.log.Info("config reloaded")
	g.reloadNotes(cfg)
	return nil
}

// reloadNotes logs, at Warn, what of cfg a reload applied only in part: a
// key that changes what the running servers do but that some part of them
// keeps as it started, without the key being refused as a restart-only
// one (its other uses follow the reload).
func (g *Gateway) reloadNotes(cfg *config.Config) {
	if kept := time.Duration(g.h2ByteTimeout.Load()); kept > 0 && cfg.Timeouts.Write != kept {
		// HTTP/1 answers and HTTP/2 streams take the new value; the
		// HTTP/2 server's byte timeout, read as each connection starts
		// from the server's config, cannot change under it.
		g.log.Warn("timeouts.write reloaded for HTTP/1 answers and HTTP/2 streams; "+
			"HTTP/2 connections keep the write byte timeout the gateway started with until a restart",
			"timeouts.write", cfg.Timeouts.Write.String(), "http2_write_byte_timeout", kept.String())
	}
	if kept := time.Duration(g.tlsHandshake.Load()); kept > 0 && handshakeBound(cfg.Timeouts) != kept {
		// net/http's server reads its own timeouts, set as it started,
		// for each handshake.
		g.log.Warn("timeouts reloaded; a TLS handshake keeps the bound the gateway started with "+
			"(the shortest of timeouts.read_header, read and write) until a restart",
			"now", handshakeBound(cfg.Timeouts).String(), "tls_handshake", kept.String())
	}
}

// groupLimits returns the limits a reload to st gives each of st.limited,
// each checked as Executor.SetGroupLimits checks it. It changes nothing.
func (g *Gateway) groupLimits(st *state) (map[string]policy.GroupLimits, error) {
	limits := make(map[string]policy.GroupLimits, len(st.limited))
	var errs []error
	for name := range st.limited {
		l, err := st.pol.Group(name)
		switch {
		case err != nil:
		case name == "":
			err = errEmptyGroup
		default:
			err = l.Validate()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("group %q: %w", name, err))
			continue
		}
		limits[name] = l
	}
	return limits, errors.Join(errs...)
}

// errEmptyGroup is groupLimits' error for a config whose default tenant is
// "" (one not made by config.Parse, which refuses it).
var errEmptyGroup = errors.New("the group key must not be empty")

// applyLimits gives the executor st's global limit and the group limits
// groupLimits checked. Having been checked, they are refused only once the
// executor is shut down (Close, at the end of a drain), when it admits
// nothing more: a reload cut short then leaves no request to run under a
// mix of old and new limits.
func (g *Gateway) applyLimits(st *state, limits map[string]policy.GroupLimits) error {
	if err := g.ex.SetGlobalMaxInFlight(st.pol.GlobalMaxInFlight()); err != nil {
		return err
	}
	for name, l := range limits {
		if err := g.ex.SetGroupLimits(name, l); err != nil {
			return err
		}
	}
	return nil
}
