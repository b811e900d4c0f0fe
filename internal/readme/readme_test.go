package readme

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

var goBlock = regexp.MustCompile("(?s)```go\n(.*?)```")

// indent indents each non-empty line of s by one tab, as a function body.
func indent(s string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(strings.TrimSuffix(s, "\n"), "\n") {
		if line != "" {
			b.WriteString("\t")
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// The snippets compiled here are the README's text: a change to one is
// made in both places, or this fails.
func TestSnippetsAreTheREADMEs(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	quickstart, err := os.ReadFile("quickstart/main.go")
	if err != nil {
		t.Fatal(err)
	}
	snippets, err := os.ReadFile("snippets_test.go")
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlock.FindAllStringSubmatch(string(readme), -1)
	if len(blocks) != 7 {
		t.Fatalf("README has %d Go snippets, this package compiles 7: add the new one to snippets_test.go", len(blocks))
	}
	if blocks[0][1] != string(quickstart) {
		t.Errorf("the README's quick start differs from quickstart/main.go")
	}
	for _, b := range blocks[1:] {
		if !strings.Contains(string(snippets), indent(b[1])) {
			t.Errorf("snippets_test.go lacks the README's snippet:\n%s", b[1])
		}
	}
}

// The snippets are compiled, not run: they need a server, a Redis and a
// network. This keeps them referenced.
var _ = []any{submit, groupBreaker, standaloneBulkhead, adapters, promCollector, clusterLimits}
