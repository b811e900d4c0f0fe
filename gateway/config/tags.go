package config

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// tagErrors reports every explicit tag of the document (!!binary, !foo)
// that the config does not take, naming its key and line.
//
// A !!binary key or value is refused, not decoded. The config is text: a
// tenant key, a header or an address written in base64 hides what it
// names from whoever reads or greps the file, and gains nothing, as every
// name the config takes is printable. And only the decoder would decode
// it: the checks that read the file's nodes (the key index, null keys,
// the tenants mapping) read a key as written, so that a !!binary listen
// key set the listen address for the decoder and left it unset for them,
// which then gave it its default, and a !!binary tenant key configured a
// tenant named by its base64.
func tagErrors(root *yaml.Node) []*Error {
	var errs []*Error
	var walk func(n *yaml.Node, path string, line int)
	walk = func(n *yaml.Node, path string, line int) {
		if n.Style&yaml.TaggedStyle != 0 {
			if reason := badTag(n); reason != "" {
				errs = append(errs, &Error{Line: line, Key: path, Reason: reason})
			}
		}
		switch n.Kind {
		case yaml.DocumentNode, yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c, path, c.Line)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				// A value's problem is its key's, on the key's line,
				// as the other checks report it.
				walk(k, p, k.Line)
				walk(v, p, k.Line)
			}
		}
	}
	walk(root, "", 0)
	return errs
}

// badTag returns why the explicit tag of n is refused, or "".
func badTag(n *yaml.Node) string {
	if tag := n.ShortTag(); tag == "!!binary" {
		return fmt.Sprintf("!!binary %q: base64 is not taken, write the text itself", n.Value)
	}
	return ""
}
