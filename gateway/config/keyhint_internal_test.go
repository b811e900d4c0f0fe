package config

import (
	"strings"
	"testing"
)

// editDistance's table holds a key of maxKeyLen: a longer one would be
// out of its bounds.
func TestKnownKeysFitTheHintTable(t *testing.T) {
	if len(keysOf) < 10 {
		t.Fatalf("keysOf has %d mappings: %v", len(keysOf), keysOf)
	}
	for typ, keys := range keysOf {
		for _, k := range keys {
			if len(foldKey(k)) > maxKeyLen {
				t.Errorf("%s.%s is longer than maxKeyLen (%d)", typ, k, maxKeyLen)
			}
		}
	}
}

// A long unknown key is weighed by its length alone, and gets no hint.
func TestUnknownKeyLongName(t *testing.T) {
	if got := unknownKey(strings.Repeat("listen", 1<<16), rootType); got != "unknown key" {
		t.Errorf("got %q", got)
	}
	if got := unknownKey("queue_timeuot", "config.Limits"); got != "unknown key: did you mean queue_timeout?" {
		t.Errorf("got %q", got)
	}
}
