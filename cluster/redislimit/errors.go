package redislimit

import (
	"errors"
	"fmt"
)

var (
	// ErrLeaseLost is the cause a task's context is cancelled with when the
	// lease its permit came from is lost: not renewed within its TTL (this
	// process was paused, partitioned from Redis, or Redis was down), or
	// found gone in Redis (expired, or Redis restarted empty). Another
	// holder may have its slot by now. errors.As gives the *LeaseLostError.
	ErrLeaseLost = errors.New("redislimit: lease lost")
	// ErrUnavailable marks a task refused under FailClosed because Redis
	// could not be reached and no leased permit was at hand.
	ErrUnavailable = errors.New("redislimit: redis unavailable")
	// ErrKeyFailed marks a task refused because Redis answered its key's
	// refill with an error reply that is no outage (WRONGTYPE: a key under
	// the limiter's prefix holds a value of another type): such a reply
	// comes again at every call, so the key's tasks would wait for ever.
	// The error names the key (one over 200 bytes as its Redis keys do:
	// its first 200 bytes and its SHA-256) and carries the reply. The
	// key's tasks are refused for a renew interval after it, with no call
	// to Redis; the first to ask after that asks Redis again. Other keys
	// are served.
	ErrKeyFailed = errors.New("redislimit: redis refused the key's script")
	// ErrClosed marks a task refused, or whose lease was dropped, because
	// the Holder was closed.
	ErrClosed = errors.New("redislimit: holder closed")
	// ErrInvalidOption is matched by every *OptionError.
	ErrInvalidOption = errors.New("redislimit: invalid option")
)

// LeaseLostError says which lease was lost and why. It matches ErrLeaseLost.
type LeaseLostError struct {
	Key    string // the executor's key: the group, or "" for the global limit
	Token  int64  // the lost lease's fencing token
	Reason string // why, in words: "not renewed within 80% of its TTL", "holder closed"
	Err    error  // the underlying cause, if any: ErrClosed when the Holder was closed

	name string // Key's name in Redis (keyName), set by the holder: hashed once
}

// Error names the key as its Redis keys do (keyName): a key over 200 bytes
// by its first 200 bytes and its SHA-256, so that a key a client made up
// of a megabyte does not make every message carrying the error one.
func (e *LeaseLostError) Error() string {
	name := e.name
	if name == "" {
		name = keyName(e.Key)
	}
	return fmt.Sprintf("redislimit: lease lost (key %q, token %d): %s", name, e.Token, e.Reason)
}

// Is reports whether target is ErrLeaseLost.
func (e *LeaseLostError) Is(target error) bool { return target == ErrLeaseLost }

// Unwrap returns the underlying cause (ErrClosed after Close), or nil.
func (e *LeaseLostError) Unwrap() error { return e.Err }

// OptionError names the option and value New (or Attach, for a scope's
// limit) refused, and why. It matches ErrInvalidOption.
type OptionError struct {
	Option string // the option, as written: "WithLeaseTTL"
	Value  any    // the value given
	Reason string // the rule it broke: "must be >= 100ms"
}

// Error names the option, its value and the rule it broke.
func (e *OptionError) Error() string {
	return fmt.Sprintf("redislimit: %s(%v): %s", e.Option, e.Value, e.Reason)
}

// Is reports whether target is ErrInvalidOption.
func (e *OptionError) Is(target error) bool { return target == ErrInvalidOption }
