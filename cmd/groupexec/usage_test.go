package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// A command line groupexec gateway refuses is one line naming the cause,
// the flag as typed, then a line pointing at --help, on stderr, exit 2:
// the flags' help printed in full between the flag package's message and
// the command's own said the cause twice, and "-bogus" of a "--bogus".
func TestGatewayUsageErrorIsOneLineAndAHint(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		cause string
	}{
		{[]string{"--bogus"}, "unknown flag --bogus"},
		{[]string{"-bogus"}, "unknown flag -bogus"},
		{[]string{"--demo", "--bogus=1"}, "unknown flag --bogus"},
		{[]string{"--demo", "--duration", "5"}, `--duration "5": time: missing unit in duration "5"`},
		{[]string{"--demo", "-duration=5"}, `-duration "5": time: missing unit in duration "5"`},
		{[]string{"--config", "x", "--check=maybe"}, "--check=maybe: must be true or false"},
		{[]string{"--config"}, "--config needs a value"},
		{[]string{"--demo", "-duration"}, "-duration needs a value"},
		{[]string{"---demo"}, `bad flag syntax "---demo"`},
		{[]string{"--demo", "x"}, `unexpected argument "x"`},
		{[]string{"--demo", "--config", "x"}, "--demo and --config exclude each other"},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"gateway"}, tc.args...), &out, &errb)
		want := "groupexec: usage: " + tc.cause + "\nrun 'groupexec gateway --help' for the flags\n"
		if code != 2 || out.Len() != 0 || errb.String() != want {
			t.Errorf("gateway %v: exit %d, stdout %q, stderr %q; want 2, nothing, %q", tc.args, code, out.String(), errb.String(), want)
		}
	}
}

// --help, -h and -help print the gateway's help whole, to stdout, exit 0,
// each flag named with two dashes as the docs write it; nothing goes to
// stderr.
func TestGatewayHelpToStdout(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"-help"}, {"--demo", "--help"}} {
		var out, errb bytes.Buffer
		code := run(append([]string{"gateway"}, args...), &out, &errb)
		help := out.String()
		if code != 0 || errb.Len() != 0 || !strings.HasPrefix(help, "Usage: groupexec gateway ") {
			t.Errorf("gateway %v: exit %d, stdout %q, stderr %q; want 0 and the help on stdout alone", args, code, help, errb.String())
			continue
		}
		for _, line := range []string{"\n  --config file\n", "\n  --demo\n", "\n  --duration duration\n", "\n  --check\n", "\n  --log-level level\n", "\n  --log-format format\n"} {
			if !strings.Contains(help, line) {
				t.Errorf("gateway %v: the help has no line %q:\n%s", args, strings.TrimSpace(line), help)
			}
		}
		if strings.Contains(help, "\n  -c") || strings.Contains(help, "\n  -d") || strings.Contains(help, "\n  -l") {
			t.Errorf("gateway %v: the help names a flag with one dash:\n%s", args, help)
		}
	}
}

// The usage error docs/gateway.md shows is the one the command prints.
func TestDocsShowTheUsageErrorPrinted(t *testing.T) {
	data, err := os.ReadFile("../../docs/gateway.md")
	if err != nil {
		t.Fatal(err)
	}
	const prompt = "$ groupexec gateway --demo --duration 5\n"
	doc := string(data)
	at := strings.Index(doc, prompt)
	if at < 0 {
		t.Fatalf("docs/gateway.md shows no %q", strings.TrimSpace(prompt))
	}
	shown, _, _ := strings.Cut(doc[at+len(prompt):], "```")
	var out, errb bytes.Buffer
	if code := run([]string{"gateway", "--demo", "--duration", "5"}, &out, &errb); code != 2 || errb.String() != shown {
		t.Errorf("gateway --demo --duration 5: exit %d, stderr %q; docs/gateway.md shows exit 2 and %q", code, errb.String(), shown)
	}
}

// A help flag does not end the command line: what follows it is read as
// what precedes it is. "gateway --help extra" printed the help and exited
// 0, dropping the word, where "gateway extra --help" and "help extra" are
// usage errors; a flag after the help flag is taken or refused as one
// before it.
func TestGatewayHelpFlagReadsTheRestOfTheLine(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		cause string // "": the help, exit 0
	}{
		{[]string{"--help", "extra"}, `unexpected argument "extra"`},
		{[]string{"-h", "--demo", "x"}, `unexpected argument "x"`},
		{[]string{"--help", "--", "x"}, `unexpected argument "x"`},
		{[]string{"--help", "--bogus"}, "unknown flag --bogus"},
		{[]string{"-help", "--demo", "--duration", "5"}, `--duration "5": time: missing unit in duration "5"`},
		{[]string{"--help", "--help", "extra"}, `unexpected argument "extra"`},
		{[]string{"--help", "--config"}, "--config needs a value"},
		{[]string{"--help", "--demo"}, ""},
		{[]string{"--help", "--config", "x", "-h"}, ""},
		{[]string{"--help", "--"}, ""},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"gateway"}, tc.args...), &out, &errb)
		if tc.cause == "" {
			if code != 0 || errb.Len() != 0 || !strings.HasPrefix(out.String(), "Usage: groupexec gateway ") {
				t.Errorf("gateway %v: exit %d, stdout %q, stderr %q; want 0 and the help", tc.args, code, out.String(), errb.String())
			}
			continue
		}
		want := "groupexec: usage: " + tc.cause + "\nrun 'groupexec gateway --help' for the flags\n"
		if code != 2 || out.Len() != 0 || errb.String() != want {
			t.Errorf("gateway %v: exit %d, stdout %q, stderr %q; want 2, nothing, %q", tc.args, code, out.String(), errb.String(), want)
		}
	}
}
