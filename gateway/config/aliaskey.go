package config

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// aliasKeys reports every alias used as a mapping key (*name: value),
// naming the key it stands for and its line. The decoder decodes it as
// the key its anchor names, but the key index, the null checks and the
// merges read a key by its text, which for an alias is the anchor's name:
// a key set so would be absent to the defaults, which would replace its
// value (*n: 127.0.0.1:1, n naming listen, would leave the default
// address), and the keys under it would be looked up under another path
// (a tenant's burst, given, would take its default). Nothing is lost by
// writing the key itself.
func aliasKeys(root *yaml.Node) []*Error {
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
			name := k.Value
			if k.Kind == yaml.AliasNode {
				if k.Alias != nil && k.Alias.Kind == yaml.ScalarNode {
					name = k.Alias.Value
				} else {
					name = "*" + k.Value
				}
			}
			p := name
			if isMergeKey(k) {
				// The merged mappings' keys are the mapping's own.
				p = path
			} else if path != "" {
				p = path + "." + name
			}
			if k.Kind == yaml.AliasNode {
				errs = append(errs, &Error{Line: k.Line, Key: p,
					Reason: fmt.Sprintf("the alias *%s is a key here: write the key itself", k.Value)})
			}
			walk(v, p)
		}
	}
	walk(root, "")
	return errs
}
