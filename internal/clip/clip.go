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
	cut := Prefix(s, MaxQuoted)
	return strconv.Quote(cut) + "... (" + strconv.Itoa(len(s)-len(cut)) + " more bytes)"
}

// Prefix returns s if it has at most n bytes, else its first n bytes at
// most, cut where a UTF-8 character starts: a character cut in two would
// show as bytes the text does not have. Invalid UTF-8 is cut at most
// utf8.UTFMax-1 bytes back from n, and never back past its first byte.
func Prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for i := 1; i < utf8.UTFMax && cut > 0 && !utf8.RuneStart(s[cut]); i++ {
		cut--
	}
	return s[:cut]
}
