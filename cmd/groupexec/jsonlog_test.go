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

// A gateway that cannot start, with --log-format json, reports why in a
// JSON record, not in a plain line after the JSON ones: a log pipeline
// reads every line of a JSON log as JSON. It exits 1 as with the text log,
// which keeps its plain line.
func TestJSONLogStaysJSONWhenTheGatewayFails(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	for _, tc := range []struct{ name, yaml, want string }{
		{"address taken", "listen: " + taken.Addr().String() + "\nadmin: 127.0.0.1:0\n", taken.Addr().String()},
		{"file refused", "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nmax_conns: 100\nmax_conns_per_client: 200\n", "max_conns_per_client: 200 is more than max_conns (100)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "c.yaml")
			if err := os.WriteFile(path, []byte("backends: [http://127.0.0.1:1]\n"+tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			if code := run([]string{"gateway", "--config", path, "--log-format", "json"}, &out, &errb); code != 1 {
				t.Fatalf("exit %d, stderr %q; want 1", code, errb.String())
			}
			lines := strings.Split(strings.TrimRight(errb.String(), "\n"), "\n")
			var last map[string]any
			for _, l := range lines {
				last = nil
				if err := json.Unmarshal([]byte(l), &last); err != nil {
					t.Fatalf("a line of the JSON log is not JSON: %q (stderr %q)", l, errb.String())
				}
			}
			if last["level"] != "ERROR" || !strings.Contains(last["err"].(string), tc.want) {
				t.Errorf("last record %v; want an ERROR whose err says %q", last, tc.want)
			}

			errb.Reset()
			if code := run([]string{"gateway", "--config", path}, &out, &errb); code != 1 || !strings.HasPrefix(errb.String(), "groupexec: ") || !strings.Contains(errb.String(), tc.want) {
				t.Errorf("text log: exit %d, stderr %q; want 1 and a plain line saying %q", code, errb.String(), tc.want)
			}
		})
	}
}
