package config

import (
	"fmt"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The check for the tag "!" reads the file once, forward, however it is
// written: each node it looks at comes after the last one, empty values,
// anchors, merges, flow and block collections included. Read again from
// the start for a node, a file of many tenants on one line would cost the
// square of its length.
func TestNonSpecificTagCheckReadsForward(t *testing.T) {
	var b strings.Builder
	b.WriteString("backends: [http://a:1]\nbase: &base {share: 2}\ntenant:\n  header:\n  trusted_proxies:\n  - 10.0.0.1\n  -\n")
	b.WriteString("limits:\n  <<: *base\n  ? global_max_in_flight\n  : 5\ntenants: {")
	for i := range 2000 {
		fmt.Fprintf(&b, "t%d: {share: %d, max_in_flight: &m%d 3}, ", i, i+1, i)
	}
	b.WriteString("x: {}}\n")
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(b.String()), &root); err != nil {
		t.Fatal(err)
	}
	src := newSource([]byte(b.String()))
	if errs := tagErrors(&root, src); len(errs) != 0 {
		t.Fatalf("tagErrors: %v", errs[0])
	}
	if src.restarts != 0 {
		t.Errorf("the text was read from its start again %d times", src.restarts)
	}
}
