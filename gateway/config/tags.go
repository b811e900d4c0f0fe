package config

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// tagErrors reports every explicit tag of the document that the config
// does not take, naming its key and line. It takes the core schema's
// (!!str, !!int, !!float, !!bool, !!null) on a scalar they fit, !!map on a
// mapping, !!seq on a list and !!merge on the merge key <<, and refuses
// every other: a tag its value does not fit (!!null x), which the
// decoder refuses with the whole file, naming neither key nor line; a
// tag of no meaning here (!foo, !!timestamp, !!set, a %TAG's), whose
// text the decoder takes for a string where a reader of the file is told
// it is something else (and for no number, under the key's parent); and
// !!merge on another key, which the key index would take for a merge
// and the decoder for the key.
//
// A !!binary key or value is refused, not decoded. The config is text: a
// tenant key, a header or an address written in base64 hides what it
// names from whoever reads or greps the file, and gains nothing, as every
// name the config takes is printable. And only the decoder would decode
// it: the checks that read the file's nodes (the key index, null keys,
// the tenants mapping) read a key as written, so that a !!binary listen
// key would set the address for the decoder and leave it unset for them,
// which would then give it its default, and a !!binary tenant key would
// configure a tenant named by its base64.
//
// The non-specific tag "!" (`max_groups: ! 5`) is refused too, on any
// node. YAML says it makes a scalar text ("5") and a mapping or list
// what it is, but the decoder drops it, reading the scalar as if
// untagged (the number 5): the file would mean one thing to its reader,
// or to another YAML tool, and another to the gateway. A value to be
// text is quoted.
func tagErrors(root *yaml.Node, src *source) []*Error {
	var errs []*Error
	var walk func(n *yaml.Node, path string, line int)
	walk = func(n *yaml.Node, path string, line int) {
		if n.Style&yaml.TaggedStyle != 0 {
			if reason := badTag(n, path); reason != "" {
				errs = append(errs, &Error{Line: line, Key: path, Reason: reason})
			}
		} else if src.nonSpecificTag(n) {
			errs = append(errs, &Error{Line: line, Key: path, Reason: nonSpecificReason})
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
				if isMergeKey(k) {
					// The merged mappings' keys are the mapping's own.
					p = path
				} else if path != "" {
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

// nonSpecificReason is why the tag "!" is refused.
const nonSpecificReason = "the non-specific tag ! is not one the config takes (YAML makes a value so tagged text, the decoder reads it as untagged): remove it, or quote the value for text"

// badTag returns why the explicit tag of n, a node of the key at path, is
// refused, or "".
func badTag(n *yaml.Node, path string) string {
	tag := n.ShortTag()
	switch tag {
	case "!!binary":
		return fmt.Sprintf("!!binary %q: base64 is not taken, write the text itself", n.Value)
	case "!!merge":
		if n.Kind == yaml.ScalarNode && n.Value == "<<" {
			return ""
		}
		return "the tag !!merge marks the merge key << only: remove it"
	case "!!map", "!!seq":
		if tag == "!!map" && n.Kind == yaml.MappingNode || tag == "!!seq" && n.Kind == yaml.SequenceNode {
			return ""
		}
		return fmt.Sprintf("the tag %s does not fit a %s: remove it", tag, kindName(n.Kind))
	}
	what, ok := scalarTags[tag]
	switch {
	case !ok:
		return fmt.Sprintf("the tag %s is not one the config takes (!!str, !!int, !!float, !!bool, !!null, !!map, !!seq): remove it", tag)
	case n.Kind != yaml.ScalarNode:
		return fmt.Sprintf("the tag %s does not fit a %s: remove it", tag, kindName(n.Kind))
	}
	// The decoder's own reading of the text under the tag, which fails
	// where the text is not what the tag says.
	var v any
	if what != "" && (&yaml.Node{Kind: yaml.ScalarNode, Tag: n.Tag, Value: n.Value}).Decode(&v) != nil {
		return fmt.Sprintf("%q is not %s, as its tag %s says: remove the tag", shownValue(path, n.Value), what, tag)
	}
	return ""
}

// scalarTags are the tags taken on a scalar, and what each says its text
// is ("": any text).
var scalarTags = map[string]string{
	"!!str": "", "!!int": "an integer", "!!float": "a number", "!!bool": "a boolean", "!!null": "a null",
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	default:
		return "scalar"
	}
}
