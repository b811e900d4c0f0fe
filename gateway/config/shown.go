package config

import "github.com/groupexec/groupexec/internal/clip"

// maxShown is the most bytes of a value, or of a key, that an error
// quotes: enough to tell it by, where quoted whole a value of megabytes
// (a file written to hurt, a secret pasted in the wrong place) made a
// line of megabytes in the log of every reload refused.
const maxShown = 256

// shown is s as an error quotes it: whole, or its first bytes and "...".
func shown(s string) string {
	if len(s) <= maxShown {
		return s
	}
	return clip.Prefix(s, maxShown-len("...")) + "..."
}

// shownArgs is args with each string shown as an error quotes it.
func shownArgs(args []any) []any {
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = shown(s)
		}
	}
	return args
}

// shownValue is s, the value of the key at path, as an error quotes it: a
// backend's without its password (redactPassword), as the checks of the
// backends name them, wherever the value is refused.
func shownValue(path, s string) string {
	if path == "backends" {
		s = redactPassword(s)
	}
	return shown(s)
}
