package config_test

import (
	"testing"

	"github.com/groupexec/groupexec/gateway/config"
)

// A byte the YAML reader refuses (a control character, bytes that are not
// UTF-8: a binary file given for the config, a value pasted from a
// terminal) is named with its line: the reader's own error had none, and
// "control characters are not allowed" left the operator to search the
// whole file for a byte that does not show.
func TestUnreadableByteNamedWithItsLine(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"backends: [http://a:1]\nlisten: \"a\x01b\"\n", `config: line 2: control characters are not allowed (U+0001)`},
		{"backends: [http://a:1]\n# ok\n\nlisten: a\x7fb\n", `config: line 4: control characters are not allowed (U+007F)`},
		{"backends: [http://a:1]\nlisten: \"\xff\xfe\"\n", `config: line 2: invalid UTF-8 (byte 0xff): a config file is UTF-8 text`},
		{"backends: [http://a:1]\r\nlisten: x\r\ntenant: {header: \"\xc3\"}\r\n", `config: line 3: invalid UTF-8 (byte 0xc3): a config file is UTF-8 text`},
		{"backends: [http://a:1]\u2028listen: \"\x02\"", `config: line 2: control characters are not allowed (U+0002)`},
		{"\x7fELF\x02\x01\x01\x00", `config: line 1: control characters are not allowed (U+007F)`},
	} {
		_, err := config.Parse([]byte(tc.yaml))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: %v; want %s", tc.yaml, err, tc.want)
		}
	}
}
