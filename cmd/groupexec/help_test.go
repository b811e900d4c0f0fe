package main

import (
	"bytes"
	"strings"
	"testing"
)

// help takes no arguments, as version takes none: "groupexec help gateway"
// printed the command's help and dropped the word, as if it were the
// gateway's, and "--help --demo" exited 0 without a demo. It is a usage
// error naming the argument and pointing at the gateway's own help.
func TestHelpTakesNoArguments(t *testing.T) {
	for _, args := range [][]string{{"help", "gateway"}, {"--help", "--demo"}, {"-h", "x"}, {"-help", "version"}} {
		var out, errb bytes.Buffer
		code := run(args, &out, &errb)
		if code != 2 || out.Len() != 0 || !strings.Contains(errb.String(), "takes no arguments, got "+`"`+args[1]+`"`) ||
			!strings.Contains(errb.String(), "groupexec gateway --help") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and a usage error naming %q", args, code, out.String(), errb.String(), args[1])
		}
	}
}
