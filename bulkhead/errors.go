package bulkhead

import (
	"fmt"
	"time"
)

// Error is a bulkhead sentinel error. Match it with errors.Is; Code returns
// its stable code, for logs and metrics that must not change with wording.
type Error struct {
	code string
	msg  string
}

// Error returns the sentinel's message.
func (e *Error) Error() string { return e.msg }

// Code returns the error's stable code, e.g. "RB_ERR_AT_CAPACITY".
func (e *Error) Code() string { return e.code }

// The sentinels. Every error the package returns is one of them or matches
// one with errors.Is (except context errors from Acquire, Submit and Wait).
var (
	// ErrCapabilityRequired: the bulkhead requires a capability
	// (WithRequiredCapability) that the context does not carry.
	ErrCapabilityRequired = &Error{"RB_ERR_NO_REMOTECAP", "bulkhead: required capability missing"}
	// ErrAtCapacity: every permit is out and there is no queue to wait in
	// (or the request can never fit the current limit).
	ErrAtCapacity = &Error{"RB_ERR_AT_CAPACITY", "bulkhead: at capacity"}
	// ErrQueueSaturated: every permit is out and the wait queue is full.
	ErrQueueSaturated = &Error{"RB_ERR_QUEUE_SATURATED", "bulkhead: wait queue saturated"}
	// ErrQueueTimeout: the request waited the queue's maximum wait and got
	// no permit. It holds nothing.
	ErrQueueTimeout = &Error{"RB_ERR_QUEUE_TIMEOUT", "bulkhead: queue wait timed out"}
	// ErrUnknownPermit: Release of a permit that is not outstanding: already
	// released, from another bulkhead, or the zero Permit.
	ErrUnknownPermit = &Error{"RB_ERR_UNKNOWN_PERMIT", "bulkhead: unknown permit"}
	// ErrDraining: the limit was lowered below the permits in flight, and no
	// new permit is issued until in-flight drops below it.
	ErrDraining = &Error{"RB_ERR_DRAINING", "bulkhead: draining to a lowered limit"}
	// ErrInvalidConfig: an invalid option, limit or argument.
	ErrInvalidConfig = &Error{"RB_ERR_INVALID_CONFIG", "bulkhead: invalid configuration"}
)

// RejectedError details a refused acquire: which sentinel (Err) and the
// numbers at the moment of refusal. errors.Is(err, ErrAtCapacity) and the
// like match it. Refusals with the same numbers may return the same
// *RejectedError (so that a refusal under overload allocates nothing): treat
// it as read-only.
type RejectedError struct {
	Err        *Error        // ErrCapabilityRequired, ErrAtCapacity, ErrQueueSaturated, ErrQueueTimeout or ErrDraining
	Limit      int           // the limit in force (the drain target while draining)
	InFlight   int           // permits out
	Weight     int           // permits requested
	QueueDepth int           // requests waiting
	MaxDepth   int           // the queue's maximum depth; 0 without a queue
	MaxWait    time.Duration // the queue's maximum wait; 0 without a queue
	Capability string        // the required capability, for ErrCapabilityRequired
}

// Error gives the sentinel's message and the numbers that refused the
// acquire.
func (e *RejectedError) Error() string {
	switch e.Err {
	case ErrCapabilityRequired:
		return fmt.Sprintf("%s: %q", e.Err.msg, e.Capability)
	case ErrQueueSaturated:
		return fmt.Sprintf("%s (%d of %d waiting, %d of %d in flight)", e.Err.msg, e.QueueDepth, e.MaxDepth, e.InFlight, e.Limit)
	case ErrQueueTimeout:
		return fmt.Sprintf("%s after %v (%d of %d in flight)", e.Err.msg, e.MaxWait, e.InFlight, e.Limit)
	case ErrDraining:
		return fmt.Sprintf("%s (%d in flight, target %d)", e.Err.msg, e.InFlight, e.Limit)
	}
	return fmt.Sprintf("%s (%d of %d in flight, %d requested)", e.Err.msg, e.InFlight, e.Limit, e.Weight)
}

// Code returns the stable code of Err.
func (e *RejectedError) Code() string { return e.Err.code }

// Unwrap returns Err.
func (e *RejectedError) Unwrap() error { return e.Err }

// PermitError is ErrUnknownPermit with the permit's ID.
type PermitError struct {
	ID uint64 // the ID of the permit that is not outstanding (0 for the zero Permit)
}

// Error gives ErrUnknownPermit's message and the permit's ID.
func (e *PermitError) Error() string { return fmt.Sprintf("%s: %d", ErrUnknownPermit.msg, e.ID) }

// Code returns "RB_ERR_UNKNOWN_PERMIT".
func (e *PermitError) Code() string { return ErrUnknownPermit.code }

// Unwrap returns ErrUnknownPermit.
func (e *PermitError) Unwrap() error { return ErrUnknownPermit }

// ConfigError is ErrInvalidConfig naming the option or argument and its
// value.
type ConfigError struct {
	Option string // e.g. "New limit", "WithQueue depth"
	Value  any    // the value given
	Reason string // e.g. "must be >= 1"
}

// Error gives ErrInvalidConfig's message, the option, its value and the
// reason.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("%s: %s = %v: %s", ErrInvalidConfig.msg, e.Option, e.Value, e.Reason)
}

// Code returns "RB_ERR_INVALID_CONFIG".
func (e *ConfigError) Code() string { return ErrInvalidConfig.code }

// Unwrap returns ErrInvalidConfig.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// PanicError is the Result.Err of a Submit whose function panicked.
type PanicError struct {
	Value any    // what was passed to panic
	Stack []byte // the panicking goroutine's stack
}

// Error gives the panic value.
func (e *PanicError) Error() string { return fmt.Sprintf("bulkhead: function panicked: %v", e.Value) }

// Unwrap returns the panic value if it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// ErrGoexit is the Result.Err of a Submit whose function called
// runtime.Goexit (or whose clock's Now did as the run was timed, before the
// function ran), and the error of a queued Acquire whose context's Err
// exited the goroutine that served the queue, or whose context's error's
// Error did as the request left the queue, on its own goroutine or on the
// one that served the queue.
var ErrGoexit = &Error{"RB_ERR_GOEXIT", "bulkhead: function called runtime.Goexit"}
