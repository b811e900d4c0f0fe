package policy

import (
	"errors"
	"fmt"

	"github.com/groupexec/groupexec/internal/clip"
)

// ErrInvalidOption is matched (with errors.Is) by every error New returns for
// an invalid option.
var ErrInvalidOption = errors.New("policy: invalid option")

// OptionError names the option and value that New refused, and why.
type OptionError struct {
	Option string // the option's name, e.g. "WithDefaultMaxConcurrency"
	// Group is the group a per-group option (WithGroup…) was given for,
	// or a resolver (With…Resolver) answered for; "" for other options.
	Group  string
	Value  any    // the value it was given, or the resolver's answer
	Reason string // what a valid value looks like

	answered bool // a resolver's answer, refused by Policy.Group
}

// Error shows the option as it was called, e.g.
// policy: WithGroupShare("gold", 0): a share must be >= 1, or a resolver's
// answer, e.g. policy: invalid option: WithShareResolver gave 0 for group
// "gold": a share must be >= 1. A group over 128 bytes is quoted by its
// first 128 bytes and how many more it has, as executor.RejectedError
// quotes one; Group holds it whole.
func (e *OptionError) Error() string {
	if e.answered {
		return fmt.Sprintf("%v: %s gave %v for group %s: %s", ErrInvalidOption, e.Option, e.Value, clip.Quote(e.Group), e.Reason)
	}
	if e.Group != "" {
		return fmt.Sprintf("policy: %s(%s, %v): %s", e.Option, clip.Quote(e.Group), e.Value, e.Reason)
	}
	return fmt.Sprintf("policy: %s(%v): %s", e.Option, e.Value, e.Reason)
}

// Is reports whether target is ErrInvalidOption.
func (e *OptionError) Is(target error) bool { return target == ErrInvalidOption }
