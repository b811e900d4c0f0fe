// Package clip quotes a key for an error message, cut to a bounded length:
// a group key or task ID is the caller's, often a client's, and one of a
// megabyte quoted whole made every message carrying it a megabyte, in
// every log line it reached. The error's fields keep the whole value.
package clip

import (
	"strconv"
	"unicode/utf8"
)

// MaxQuoted is the most bytes of a key an error message quotes: the
// longest tenant key the adapters take (128 bytes), whose refusals cut an
// invalid key there too.
const MaxQuoted = 128

// Quote returns s quoted as %q quotes it, unless it is longer than
// MaxQuoted bytes: then its first MaxQuoted bytes at most, cut where a
// UTF-8 character starts, quoted, followed by how many bytes were left
// out, as in "abc"... (1000 more bytes). The marker is outside the quotes,
// so that it is never read as part of the key.
func Quote(s string) string {
	if len(s) <= MaxQuoted {
		return strconv.Quote(s)
	}
	cut := MaxQuoted
	// Back to the start of the character the cut falls in, if it falls in
	// one: a character cut in two would show as escaped bytes the key does
	// not have. Invalid UTF-8 steps back at most as far.
	for i := 1; i < utf8.UTFMax && !utf8.RuneStart(s[cut]); i++ {
		cut--
	}
	return strconv.Quote(s[:cut]) + "... (" + strconv.Itoa(len(s)-cut) + " more bytes)"
}
