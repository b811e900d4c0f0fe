package config

import (
	"errors"
	"fmt"
)

// ErrInvalid is matched (with errors.Is) by every error Parse and Load return
// for a file they cannot use; errors.As gives the *Error.
var ErrInvalid = errors.New("config: invalid")

// Error names where in the file a problem is and what it is.
type Error struct {
	Line   int    // 1-based line of the key, or 0 when the problem has no line (an empty file)
	Key    string // dotted path of the key, e.g. "limits.queue_timeout"; empty when unknown
	Reason string // what is wrong, e.g. "unknown key"
}

// Error is "config: line N: key: reason", leaving out what is unknown.
// A key longer than maxShown is cut short, as the values a reason quotes
// are.
func (e *Error) Error() string {
	key := shown(e.Key)
	switch {
	case e.Line > 0 && e.Key != "":
		return fmt.Sprintf("config: line %d: %s: %s", e.Line, key, e.Reason)
	case e.Line > 0:
		return fmt.Sprintf("config: line %d: %s", e.Line, e.Reason)
	case e.Key != "":
		return fmt.Sprintf("config: %s: %s", key, e.Reason)
	default:
		return "config: " + e.Reason
	}
}

// Is reports whether target is ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }
