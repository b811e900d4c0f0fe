package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
)

// Every flag of groupexec gateway, as its own help lists them, is in the
// command's help and in the Run it section of docs/gateway.md, and every
// command the help lists runs: a flag added or renamed without them would
// be found only by reading the code.
func TestHelpAndDocsNameEveryFlag(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"gateway", "--help"}, &out, &errb); code != 0 {
		t.Fatalf("gateway --help: exit %d, stderr %q", code, errb.String())
	}
	flags := regexp.MustCompile(`(?m)^  --([a-z-]+)`).FindAllStringSubmatch(out.String(), -1)
	if len(flags) < 6 {
		t.Fatalf("gateway --help lists %d flags:\n%s", len(flags), out.String())
	}
	data, err := os.ReadFile("../../docs/gateway.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	start := strings.Index(doc, "\n## Run it\n")
	end := strings.Index(doc[start+1:], "\n## ")
	if start < 0 || end < 0 {
		t.Fatal("docs/gateway.md has no Run it section")
	}
	runIt := doc[start : start+1+end]
	for _, f := range flags {
		name := "--" + f[1]
		if !strings.Contains(usage, name) {
			t.Errorf("groupexec help does not name %s", name)
		}
		if !strings.Contains(runIt, name) {
			t.Errorf("docs/gateway.md's Run it section does not name %s", name)
		}
	}
	// Each command the help lists is one run knows.
	for _, m := range regexp.MustCompile(`(?m)^  groupexec ([a-z]+)`).FindAllStringSubmatch(usage, -1) {
		var out, errb bytes.Buffer
		run([]string{m[1], "--nope"}, &out, &errb)
		if strings.Contains(errb.String(), "unknown command") {
			t.Errorf("the help lists groupexec %s, which is an unknown command", m[1])
		}
	}
}
