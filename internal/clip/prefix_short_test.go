package clip_test

import (
	"strings"
	"testing"

	"github.com/groupexec/groupexec/internal/clip"
)

// Prefix of invalid UTF-8 cut at fewer bytes than a character can have
// steps back at most to the string's start: it stepped past it, and
// indexed before the first byte.
func TestPrefixOfInvalidUTF8UnderUTFMax(t *testing.T) {
	s := strings.Repeat("\x80", 10)
	for n := range 4 {
		want := s[:max(n-3, 0)]
		var got string
		func() {
			defer func() {
				if v := recover(); v != nil {
					t.Errorf("Prefix(%q, %d) panicked: %v", s, n, v)
				}
			}()
			got = clip.Prefix(s, n)
		}()
		if got != want {
			t.Errorf("Prefix(%q, %d) = %q, want %q", s, n, got, want)
		}
	}
	if got := clip.Prefix("é", 1); got != "" {
		t.Errorf(`Prefix("é", 1) = %q, want ""`, got)
	}
}
