package policy

import (
	"errors"
	"fmt"
)

// ErrInvalidOption is matched (with errors.Is) by every error New returns for
// an invalid option.
var ErrInvalidOption = errors.New("policy: invalid option")

// OptionError names the option and value that New refused, and why.
type OptionError struct {
	Option string // the option's name, e.g. "WithDefaultMaxConcurrency"
	Value  any    // the value it was given
	Reason string // what a valid value looks like
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("policy: %s(%v): %s", e.Option, e.Value, e.Reason)
}

// Is reports whether target is ErrInvalidOption.
func (e *OptionError) Is(target error) bool { return target == ErrInvalidOption }
