package main

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCommandLine(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("backends: [http://127.0.0.1:1]\nlimits:\n  max_inflight: 3\n"), 0o600)
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"version"}, 0, "groupexec ", ""},
		{[]string{"version", "--short"}, 2, "", `version takes no arguments, got "--short"`},
		{[]string{"--version", "x"}, 2, "", `--version takes no arguments, got "x"`},
		{[]string{"--help"}, 0, "groupexec gateway --config FILE", ""},
		{[]string{}, 2, "", "Usage:"},
		{[]string{"frobnicate"}, 2, "", `unknown command "frobnicate"`},
		{[]string{"gateway"}, 2, "", "needs --config FILE or --demo"},
		{[]string{"gateway", "--demo", "--config", "x"}, 2, "", "exclude each other"},
		{[]string{"gateway", "--nope"}, 2, "", "unknown flag --nope"},
		{[]string{"gateway", "--help"}, 0, "--duration", ""},
		{[]string{"gateway", "--config", bad}, 1, "", "line 3: limits.max_inflight: unknown key"},
		{[]string{"gateway", "--config", filepath.Join(t.TempDir(), "missing.yaml")}, 1, "", "no such file"},
		{[]string{"gateway", "--config", bad, "--check"}, 1, "", "line 3: limits.max_inflight: unknown key"},
		// The sample config in the repository is accepted as it is.
		{[]string{"gateway", "--config", "../../gateway/config/example.yaml", "--check"}, 0, "example.yaml: ok", ""},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(out.String(), tc.stdout) || !strings.Contains(errb.String(), tc.stderr) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %d, %q, %q", tc.args, code, out.String(), errb.String(), tc.code, tc.stdout, tc.stderr)
		}
	}
}

// --demo reaches the demo and --duration bounds it (the demo's own test
// checks what it shows).
func TestDemoFlag(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"gateway", "--demo", "--duration", "1ms"}, &out, &errb); code != 0 && !strings.Contains(errb.String(), "isolation") {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "gateway on http://127.0.0.1:") {
		t.Errorf("demo did not start:\n%s", out.String())
	}
}

// A flag that does nothing in the mode chosen is a usage error naming it,
// not silently ignored: --duration bounds only the demo (a gateway given it
// would run until a signal), and --check only checks a --config file.
func TestFlagsOutsideTheirMode(t *testing.T) {
	example := "../../gateway/config/example.yaml"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"gateway", "--config", example, "--check", "--duration", "5s"}, "--duration"},
		{[]string{"gateway", "--config", example, "--check", "--duration", "0s"}, "--duration"},
		{[]string{"gateway", "--demo", "--check", "--duration", "1ms"}, "--check"},
	} {
		var out, errb bytes.Buffer
		if code := run(tc.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and an error naming %s", tc.args, code, out.String(), errb.String(), tc.want)
		}
	}
}

// --check refuses an address the gateway could never listen on, as running
// the same file would: a port outside 0 to 65535 is a problem of the file.
func TestCheckRefusesUnlistenableAddress(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ key, yaml string }{
		{"listen", "listen: 127.0.0.1:99999\nadmin: 127.0.0.1:0\n"},
		{"listen", "listen: 127.0.0.1:-1\nadmin: 127.0.0.1:0\n"},
		{"admin", "listen: 127.0.0.1:0\nadmin: 127.0.0.1:65536\n"},
	} {
		path := filepath.Join(dir, "c.yaml")
		os.WriteFile(path, []byte("backends: [http://127.0.0.1:1]\n"+tc.yaml), 0o600)
		for _, args := range [][]string{{"gateway", "--config", path, "--check"}, {"gateway", "--config", path}} {
			var out, errb bytes.Buffer
			if code := run(args, &out, &errb); code != 1 || !strings.Contains(errb.String(), tc.key) {
				t.Errorf("%q %v: exit %d, stdout %q, stderr %q; want 1 and an error naming %s", tc.yaml, args, code, out.String(), errb.String(), tc.key)
			}
		}
	}
}

// A client's share of the connections larger than the whole is refused at
// start, naming both keys and values: it would cap nothing, and a file
// saying so means something else (a max_conns lowered without its share).
func TestStartRefusesConnectionShareOverTotal(t *testing.T) {
	// The proxy's address is taken: a gateway that took the file would
	// fail to listen there, rather than serve until the test times out.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte("backends: [http://127.0.0.1:1]\nlisten: "+taken.Addr().String()+"\nadmin: 127.0.0.1:0\n"+
		"max_conns: 100\nmax_conns_per_client: 200\n"), 0o600)
	const want = "line 5: max_conns_per_client: 200 is more than max_conns (100)"
	for _, args := range [][]string{{"gateway", "--config", path, "--check"}, {"gateway", "--config", path}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 1 || !strings.Contains(errb.String(), want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 1 and %q", args, code, out.String(), errb.String(), want)
		}
	}
}

// Help asked for goes to stdout, the gateway's as the command's: piped to
// a pager or grep, it is there. A refused flag's error goes to stderr,
// without the flags' help, which only --help prints.
func TestGatewayHelpOnStdout(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"gateway", "--help"}, {"gateway", "-h"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 || !strings.Contains(out.String(), "--config") || errb.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 0 and the help on stdout alone", args, code, out.String(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"gateway", "--nope"}, &out, &errb); code != 2 || out.Len() != 0 ||
		!strings.Contains(errb.String(), "--nope") || strings.Contains(errb.String(), "--config") {
		t.Errorf("a refused flag: exit %d, stdout %q, stderr %q; want 2 and the error alone on stderr", code, out.String(), errb.String())
	}
}

// --log-level and --log-format set the gateway's log: the least level
// written and the lines' format. A value neither knows is a usage error
// naming the flag and the value, as is either flag with --demo, which
// prints a table and no log.
func TestLogFlags(t *testing.T) {
	example := "../../gateway/config/example.yaml"
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"gateway", "--config", example, "--log-level", "loud"}, `--log-level "loud": must be debug, info, warn or error`},
		{[]string{"gateway", "--config", example, "--log-level", "info+2"}, `--log-level "info+2"`},
		{[]string{"gateway", "--config", example, "--log-format", "logfmt"}, `--log-format "logfmt": must be text or json`},
		{[]string{"gateway", "--demo", "--log-level", "debug"}, "--demo prints a table"},
		{[]string{"gateway", "--demo", "--log-format", "json"}, "--demo prints a table"},
	} {
		var out, errb bytes.Buffer
		if code := run(tc.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.stderr) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errb.String(), tc.stderr)
		}
	}
	// A valid pair passes the command line (the check then reads the file).
	var out, errb bytes.Buffer
	if code := run([]string{"gateway", "--config", example, "--check", "--log-level", "WARN", "--log-format", "json"}, &out, &errb); code != 0 {
		t.Errorf("--log-level WARN --log-format json: exit %d, stderr %q", code, errb.String())
	}

	for _, tc := range []struct {
		level, format string
		want          []string // the messages written, in order
		json          bool
	}{
		{"debug", "json", []string{"d", "i", "w", "e"}, true},
		{"info", "text", []string{"i", "w", "e"}, false},
		{"Warn", "text", []string{"w", "e"}, false},
		{"error", "json", []string{"e"}, true},
		{"WARN", "JSON", []string{"w", "e"}, true},
	} {
		var buf bytes.Buffer
		log, err := newLogger(&buf, tc.level, tc.format)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.level, tc.format, err)
		}
		log.Debug("d")
		log.Info("i")
		log.Warn("w")
		log.Error("e")
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			if tc.json {
				var rec struct{ Msg string }
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("%s %s: line %q is not JSON: %v", tc.level, tc.format, line, err)
				}
				got = append(got, rec.Msg)
				continue
			}
			_, msg, ok := strings.Cut(line, " msg=")
			if !ok || strings.HasPrefix(line, "{") {
				t.Fatalf("%s %s: line %q is not key=value text", tc.level, tc.format, line)
			}
			got = append(got, msg)
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("--log-level %s --log-format %s wrote %v, want %v", tc.level, tc.format, got, tc.want)
		}
	}
}
