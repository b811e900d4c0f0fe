package clip_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/internal/clip"
)

// A key of at most MaxQuoted bytes is quoted whole, as %q quotes it.
func TestQuoteShortKeyWhole(t *testing.T) {
	for _, s := range []string{"", "acme", "a\"b\n", strings.Repeat("k", clip.MaxQuoted), strings.Repeat("é", clip.MaxQuoted/2)} {
		if got, want := clip.Quote(s), strconv.Quote(s); got != want {
			t.Errorf("Quote(%d bytes) = %s, want %s", len(s), got, want)
		}
	}
}

// A longer key is cut to its first MaxQuoted bytes at most, at the start of
// a UTF-8 character, and the message says how many bytes were left out.
func TestQuoteLongKeyCut(t *testing.T) {
	for _, tc := range []struct {
		s, want string
	}{
		{strings.Repeat("k", 1<<20), strconv.Quote(strings.Repeat("k", 128)) + "... (1048448 more bytes)"},
		{strings.Repeat("k", 129), strconv.Quote(strings.Repeat("k", 128)) + "... (1 more bytes)"},
		// "€" is 3 bytes: 42 of them are 126 bytes, and the 43rd would
		// end at 129.
		{strings.Repeat("€", 100), strconv.Quote(strings.Repeat("€", 42)) + "... (174 more bytes)"},
		{"k" + strings.Repeat("é", 100), strconv.Quote("k"+strings.Repeat("é", 63)) + "... (74 more bytes)"},
		// Invalid UTF-8 is cut where it is: at most 3 bytes back.
		{strings.Repeat("\x80", 200), strconv.Quote(strings.Repeat("\x80", 125)) + "... (75 more bytes)"},
	} {
		if got := clip.Quote(tc.s); got != tc.want {
			t.Errorf("Quote(%.20q..., %d bytes) = %s, want %s", tc.s, len(tc.s), got, tc.want)
		}
	}
}

// Prefix cuts at n bytes at most, back to the start of a character, and
// leaves a string of n bytes or fewer whole.
func TestPrefix(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 3, "abc"},
		{"abcd", 3, "abc"},
		{"", 0, ""},
		{"a€", 3, "a"},
		{"a€", 4, "a€"},
		{"ab€", 3, "ab"},
		{strings.Repeat("\x80", 10), 8, strings.Repeat("\x80", 5)},
	} {
		if got := clip.Prefix(tc.s, tc.n); got != tc.want {
			t.Errorf("Prefix(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
