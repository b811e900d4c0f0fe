package config

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// mergeErrors reports every merge key (<<) whose value is not a mapping,
// an alias of one, or a list of those, naming the mapping it is in and
// its line: the decoder refuses such a file whole, as "map merge requires
// map or sequence of maps as the value", naming neither.
func mergeErrors(root *yaml.Node) []*Error {
	var errs []*Error
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		if n.Kind != yaml.MappingNode {
			for _, c := range n.Content {
				walk(c, path)
			}
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if !isMergeKey(k) {
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				walk(v, p)
				continue
			}
			if what := notMerged(v); what != "" {
				errs = append(errs, &Error{Line: k.Line, Key: path,
					Reason: "the merge key << takes a mapping, an alias of one, or a list of those: " + what})
			}
			// The merged mappings' keys are the mapping's own.
			walk(v, path)
		}
	}
	walk(root, "")
	return errs
}

// notMerged says what of the merge key's value v the decoder cannot merge,
// or returns "".
func notMerged(v *yaml.Node) string {
	if v.Kind != yaml.SequenceNode {
		return unmergeable(v)
	}
	for i, c := range v.Content {
		if unmergeable(c) == "" {
			continue
		}
		if c.Kind == yaml.AliasNode {
			return fmt.Sprintf("item %d (*%s) is a %s", i+1, c.Value, kindName(c.Alias.Kind))
		}
		return fmt.Sprintf("item %d is a %s", i+1, kindName(c.Kind))
	}
	return ""
}

// unmergeable says what n is when it is neither a mapping nor an alias of
// one, or returns "".
func unmergeable(n *yaml.Node) string {
	switch {
	case n.Kind == yaml.MappingNode:
		return ""
	case n.Kind == yaml.AliasNode && n.Alias != nil:
		if n.Alias.Kind == yaml.MappingNode {
			return ""
		}
		return fmt.Sprintf("*%s is a %s", n.Value, kindName(n.Alias.Kind))
	case n.Kind == yaml.ScalarNode:
		return fmt.Sprintf("%q is a scalar", n.Value)
	}
	return "a " + kindName(n.Kind)
}
