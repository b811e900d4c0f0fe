package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A flag given twice with two values is a usage error naming the flag and
// both values: the flag package would keep the last and drop the first
// without a word, so that a wrapper's --config and an operator's would
// run whichever came last.
func TestFlagGivenTwiceWithTwoValues(t *testing.T) {
	example := "../../gateway/config/example.yaml"
	// A file the gateway refuses as it loads it: a --check dropped for
	// --check=false ends there, and does not serve.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("lisen: x\n"), 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"gateway", "--config", "missing.yaml", "--config", example, "--check"}, `-config`},
		{[]string{"gateway", "--config", example, "--check", "--log-level", "debug", "--log-level", "error"}, `"debug"`},
		{[]string{"gateway", "--config", example, "--check", "--log-format", "json", "--log-format=text"}, `"json"`},
		{[]string{"gateway", "--demo", "--duration", "1ms", "--duration", "2ms"}, `"1ms"`},
		{[]string{"gateway", "--config", bad, "--check", "--check=false"}, `--check`},
	} {
		var out, errb bytes.Buffer
		if code := run(tc.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.want) ||
			!strings.Contains(errb.String(), "given twice") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and an error saying the flag is given twice, naming %s",
				tc.args, code, out.String(), errb.String(), tc.want)
		}
	}
	// The same value twice says one thing: it is taken.
	var out, errb bytes.Buffer
	if code := run([]string{"gateway", "--config", example, "--check", "--config", example, "--check"}, &out, &errb); code != 0 {
		t.Errorf("the same --config and --check twice: exit %d, stderr %q; want 0", code, errb.String())
	}
}

// A --duration the flag refuses says why, not only "parse error", which
// the flag package says of every duration it cannot read: one without its
// unit is the usual mistake.
func TestDurationFlagSaysWhy(t *testing.T) {
	for _, tc := range []struct{ value, why string }{
		{"5", `missing unit in duration "5"`},
		{"10 s", `unknown unit " s" in duration "10 s"`},
		{"9999999999h", `invalid duration "9999999999h"`},
	} {
		var out, errb bytes.Buffer
		code := run([]string{"gateway", "--demo", "--duration", tc.value}, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), `--duration "`+tc.value+`"`) ||
			!strings.Contains(errb.String(), tc.why) {
			t.Errorf("--duration %s: exit %d, stderr %q; want 2, naming the flag and the value, and %q", tc.value, code, errb.String(), tc.why)
		}
	}
	// The help still names the flag's type and default.
	var out, errb bytes.Buffer
	if code := run([]string{"gateway", "--help"}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "  --duration duration") || !strings.Contains(out.String(), "(default 10s)") {
		t.Errorf("gateway --help: exit %d, stdout %q; want --duration's type and default", code, out.String())
	}
}

// An empty --config is refused as given: with --demo it is the --config
// the demo excludes, not one left out (the demo ran, the flag dropped),
// and alone it names no file, which the error says rather than that no
// --config was given.
func TestEmptyConfigFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"gateway", "--demo", "--config", "", "--duration", "1ms"}, "--demo and --config exclude each other"},
		{[]string{"gateway", "--config="}, `--config "": names no file`},
		{[]string{"gateway", "--config", "", "--check"}, `--config "": names no file`},
	} {
		var out, errb bytes.Buffer
		if code := run(tc.args, &out, &errb); code != 2 || out.Len() != 0 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, out.String(), errb.String(), tc.want)
		}
	}
}

// A flag given twice with one value spelt two ways says one thing, as the
// same value twice does, and is taken: "--check=1 --check", "--duration
// 1s --duration 1000ms" and "--log-level debug --log-level DEBUG" were
// refused as two values.
func TestFlagGivenTwiceSpeltTwoWays(t *testing.T) {
	example := "../../gateway/config/example.yaml"
	for _, args := range [][]string{
		{"gateway", "--config", example, "--check=1", "--check"},
		{"gateway", "--config", example, "--check", "--check=TRUE"},
		{"gateway", "--config", example, "--check", "--log-level", "debug", "--log-level", "DEBUG"},
		{"gateway", "--config", example, "--check", "--log-format=json", "--log-format", "Json"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 || !strings.Contains(out.String(), "example.yaml: ok") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 0 and the file checked", args, code, out.String(), errb.String())
		}
	}
	// --duration only bounds the demo: 1ms for 1000us is taken, 1ms for
	// 2ms is not.
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"gateway", "--demo", "--duration", "1ms", "--duration", "1000us"}, 0},
		{[]string{"gateway", "--demo", "--duration", "1ms", "--duration", "2000us"}, 2},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		if code == 1 && strings.Contains(errb.String(), "isolation") {
			code = 0 // a 1ms demo may not show isolation: the flags were taken
		}
		if code != tc.code {
			t.Errorf("%q: exit %d, stderr %q; want %d", tc.args, code, errb.String(), tc.code)
		}
	}
}
