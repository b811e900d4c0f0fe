package config

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// unknownAnchorRe is the parser's refusal of an alias whose anchor it does
// not know, which names neither its line nor its key.
var unknownAnchorRe = regexp.MustCompile(`^yaml: unknown anchor '([0-9A-Za-z_-]+)' referenced$`)

// aliasStandIn stands for the alias indicator "*" in the text parsed to
// find an alias of an unknown anchor: one character, as "*" is, so that
// every node keeps its line and column, and one no config writes.
const aliasStandIn = "\uE000"

// unknownAnchor returns, for the parser's refusal err of data, the error
// naming the line and key of the alias whose anchor the parser did not
// know (the first such alias), or nil when err is another refusal. The
// parser does not say where the alias is: the text is parsed again with
// each "*name" of an unknown anchor written as a plain scalar (name after
// aliasStandIn), and the alias is the first such scalar of the tree
// whose place in the text is the alias. An error without a line is
// returned where that parse fails.
func unknownAnchor(data []byte, err error) *Error {
	m := unknownAnchorRe.FindStringSubmatch(err.Error())
	if m == nil {
		return nil
	}
	name := m[1]
	e := &Error{Reason: fmt.Sprintf("the alias *%s names no anchor: &%s must come before it", name, name)}
	src := newSource(data)
	names := []string{name}
	var root yaml.Node
	for {
		text := src.text
		for _, n := range names {
			text = bytes.ReplaceAll(text, []byte("*"+n), []byte(aliasStandIn+n))
		}
		root = yaml.Node{}
		err := yaml.Unmarshal(text, &root)
		if err == nil {
			break
		}
		// Another anchor unknown too, after the first's alias.
		m := unknownAnchorRe.FindStringSubmatch(err.Error())
		if m == nil || len(names) == 8 {
			return e
		}
		names = append(names, m[1])
	}
	// The keys as written, "*name" where the text had it.
	written := func(v string) string {
		for _, n := range names {
			v = strings.ReplaceAll(v, aliasStandIn+n, "*"+n)
		}
		return v
	}
	found := false
	var walk func(n *yaml.Node, path string, line int)
	walk = func(n *yaml.Node, path string, line int) {
		if found {
			return
		}
		if n.Kind == yaml.ScalarNode && n.Style&^yaml.TaggedStyle == 0 && n.Value == aliasStandIn+name &&
			bytes.HasPrefix(src.at(n), []byte("*"+name)) {
			found = true
			e.Line, e.Key = line, path
			return
		}
		switch n.Kind {
		case yaml.DocumentNode, yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c, path, c.Line)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := written(k.Value)
				if isMergeKey(k) {
					p = path
				} else if path != "" {
					p = path + "." + p
				}
				// A value's problem is its key's, on the key's line, as
				// the other checks report it.
				walk(k, p, k.Line)
				walk(v, p, k.Line)
			}
		}
	}
	walk(&root, "", 0)
	return e
}
