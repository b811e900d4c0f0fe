// Package adapt holds the rules the request adapters, httpadmit and
// grpcadmit, share: which tenant keys and weights are valid, how options are
// applied, and what each refusal by the executor means. Each adapter turns
// these into its protocol's answers; keeping the rules here keeps the two
// from drifting apart.
package adapt

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/groupexec/groupexec/internal/clip"
)

// MaxTenantLen is the longest tenant key accepted, in bytes.
const MaxTenantLen = 128

// ErrInvalidTenant and ErrInvalidWeight are exported by httpadmit, whose
// names they carry; grpcadmit's refusals match them too.
var (
	ErrInvalidTenant = errors.New("httpadmit: invalid tenant")
	ErrInvalidWeight = errors.New("httpadmit: invalid weight")
	ErrUnavailable   = errors.New("httpadmit: the server could not read the request's tenant or weight")
)

// ValidTenant reports whether s may name a tenant: 1 to MaxTenantLen bytes,
// each a printable ASCII character other than space (0x21 to 0x7E).
func ValidTenant(s string) bool {
	if len(s) == 0 || len(s) > MaxTenantLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

// Checked returns key if it is valid, else an error matching
// ErrInvalidTenant naming where the key came from.
func Checked(where, key string) (string, error) {
	if ValidTenant(key) {
		return key, nil
	}
	return "", fmt.Errorf("%w: %s %s", ErrInvalidTenant, where, clip.Quote(key))
}

// One returns the tenant named by the values of a header or a metadata key
// (where names it): no value names no tenant (""); one value is the key,
// trimmed of spaces and tabs, if it is valid; more than one is invalid, since
// picking one would let a second line choose the group.
func One(where string, vs []string) (string, error) {
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
		return Checked(where, trim(vs[0]))
	}
	return "", fmt.Errorf("%w: %s sent %d times", ErrInvalidTenant, where, len(vs))
}

// trim removes the spaces and tabs around s. It is strings.Trim(s, " \t")
// without building the cut set on every call: most keys have nothing to
// trim.
func trim(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// FromFunc returns the tenant a user's tenant function gave: its error makes
// the request invalid, unless it matches ErrUnavailable (the server failed,
// not the request), "" names no tenant, and a key must be valid.
func FromFunc(key string, err error) (string, error) {
	if err != nil {
		return "", funcError(ErrInvalidTenant, err)
	}
	if key == "" {
		return "", nil
	}
	return Checked("tenant function", key)
}

// Weight returns the weight a user's weight function gave, as
// executor.DoWeighted takes it: its error, or a negative weight, makes the
// request invalid (an error matching ErrInvalidWeight), unless the error
// matches ErrUnavailable; 0 means 1, as for DoWeighted.
func Weight(w int, err error) (int, error) {
	switch {
	case err != nil:
		return 0, funcError(ErrInvalidWeight, err)
	case w < 0:
		return 0, fmt.Errorf("%w: %d is negative", ErrInvalidWeight, w)
	}
	return max(w, 1), nil
}

// funcError returns the error of a request whose tenant or weight function
// returned err: err itself when it matches ErrUnavailable, which says the
// server failed, so that it does not match invalid too (a refusal writer
// testing for ErrInvalidTenant would answer 400); else err wrapped in
// invalid.
func funcError(invalid, err error) error {
	if errors.Is(err, ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", invalid, err)
}

// Apply applies opts to c in order, and panics with pkg's name on a nil
// option or one that apply refuses: options are fixed when a program is
// written, so an invalid one is a bug to see at once, as http.ServeMux
// treats an invalid pattern.
func Apply[O, C any](pkg string, c *C, opts []O, apply func(O, *C) error) {
	for _, o := range opts {
		if any(o) == nil {
			panic(pkg + ": nil Option")
		}
		if err := apply(o, c); err != nil {
			panic(pkg + ": " + err.Error())
		}
	}
}

// DefaultGroup checks WithDefaultGroup's group.
func DefaultGroup(group string) error {
	if !ValidTenant(group) {
		return fmt.Errorf("WithDefaultGroup(%q): not a valid tenant key", group)
	}
	return nil
}

// RetryAfter checks WithRetryAfter's delay.
func RetryAfter(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("WithRetryAfter(%v): must be > 0", d)
	}
	return nil
}

// HeaderName checks WithTenantHeader's name: an HTTP field name, a token
// (RFC 9110, section 5.1), other than Host and Transfer-Encoding. net/http
// refuses a request carrying any other name, and keeps those two out of
// Request.Header, so a handler would never see them and every request
// would name no tenant.
func HeaderName(name string) error {
	if name == "" {
		return fmt.Errorf("WithTenantHeader(%q): the header name must not be empty", name)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isDigit(c) && !isLetter(c) && !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return fmt.Errorf("WithTenantHeader(%q): not a valid header name", name)
		}
	}
	if strings.EqualFold(name, "Host") || strings.EqualFold(name, "Transfer-Encoding") {
		// net/http moves these out of Header (to Request.Host and
		// TransferEncoding), on a server and in a client's transport: read
		// from Header, every request would name no tenant.
		return fmt.Errorf("WithTenantHeader(%q): net/http never leaves this header in Request.Header (WithTenantHost reads the host)", name)
	}
	return nil
}

// MetadataKey checks WithTenantKey's key, which the interceptors lower-case:
// a gRPC metadata key has only 0-9, a-z, '-', '_' and '.'. gRPC refuses to
// send a call carrying any other key, so a server would never see it and
// every call would name no tenant; likewise the headers gRPC writes itself
// (content-type, user-agent, te and its grpc- headers), which it drops
// from a call's metadata.
func MetadataKey(key string) error {
	if key == "" {
		return fmt.Errorf("WithTenantKey(%q): the key must not be empty", key)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; !isDigit(c) && !isLetter(c) && c != '-' && c != '_' && c != '.' {
			return fmt.Errorf("WithTenantKey(%q): not a valid metadata key", key)
		}
	}
	switch strings.ToLower(key) {
	case "content-type", "user-agent", "te", "grpc-encoding", "grpc-message",
		"grpc-message-type", "grpc-status", "grpc-timeout":
		// gRPC writes these headers itself and drops them from a call's
		// metadata: a server would see gRPC's value (application/grpc, its
		// user agent) or none, never the caller's tenant.
		return fmt.Errorf("WithTenantKey(%q): gRPC sets this header itself, never from a call's metadata", key)
	}
	return nil
}

func isDigit(c byte) bool  { return '0' <= c && c <= '9' }
func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// NilFunc is the error of an option given a nil function.
func NilFunc(option string) error {
	return fmt.Errorf("%s(nil): the function must not be nil", option)
}
