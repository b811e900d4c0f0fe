// Package instname checks instrument names against OpenTelemetry's syntax,
// so that metrics/otel and clusterotel refuse a namespace that makes an
// invalid one, with an error that names the namespace, whatever the
// provider: the SDK's own error names only the instrument, and a no-op
// provider takes any name, the error then coming only once the program
// passes its real provider.
package instname

import "fmt"

// MaxLen is the longest instrument name OpenTelemetry accepts.
const MaxLen = 255

// Problem returns what makes name an invalid instrument name, or "" for a
// valid one: it starts with an ASCII letter, holds only ASCII letters,
// digits and _.-/, and is at most MaxLen characters long.
func Problem(name string) string {
	if name == "" {
		return "is empty"
	}
	if len(name) > MaxLen {
		return fmt.Sprintf("is %d characters long, more than %d", len(name), MaxLen)
	}
	if !letter(name[0]) {
		return "does not start with an ASCII letter"
	}
	for i := range len(name) {
		c := name[i]
		if !letter(c) && !('0' <= c && c <= '9') && c != '_' && c != '.' && c != '-' && c != '/' {
			return fmt.Sprintf("holds %q, not one of [A-Za-z0-9_.-/]", name[i:i+1])
		}
	}
	return ""
}

func letter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
