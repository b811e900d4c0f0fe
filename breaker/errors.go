package breaker

import (
	"errors"
	"fmt"
)

var (
	// ErrOpenState is returned, without running anything, by a request made
	// while the breaker is open.
	ErrOpenState = errors.New("breaker: circuit breaker is open")
	// ErrTooManyRequests is returned, without running anything, by a request
	// made while the breaker is half-open and MaxRequests probes are already
	// in flight.
	ErrTooManyRequests = errors.New("breaker: too many requests")
	// ErrInvalidSettings is matched (with errors.Is) by every error New
	// returns; errors.As gives the *SettingsError.
	ErrInvalidSettings = errors.New("breaker: invalid settings")
)

// SettingsError names the Settings field and value that New refused, and why.
type SettingsError struct {
	Field  string // the field's name, e.g. "Timeout"
	Value  any    // the value it was given
	Reason string // what a valid value looks like
}

// Error names the field, its value and what a valid value looks like.
func (e *SettingsError) Error() string {
	return fmt.Sprintf("breaker: Settings.%s = %v: %s", e.Field, e.Value, e.Reason)
}

// Is reports whether target is ErrInvalidSettings.
func (e *SettingsError) Is(target error) bool { return target == ErrInvalidSettings }
