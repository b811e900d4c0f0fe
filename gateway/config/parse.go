package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads and parses the file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(data)
}

// Parse parses a YAML document, fills defaults and validates the result. Every
// error it returns matches ErrInvalid and names the line and, where it can,
// the key. When several keys are wrong, all are reported (errors.Join).
func Parse(data []byte) (*Config, error) {
	// The node tree is parsed first: it reports syntax errors, and it is what
	// turns the decoder's and the validator's complaints into key paths and
	// lines.
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, syntaxError(err)
	}
	if root.Kind == 0 || len(root.Content) == 0 {
		return nil, &Error{Reason: "empty file: at least `backends` is required"}
	}
	keys := indexKeys(&root)

	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, decodeError(err, keys)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &Error{Line: extra.Line, Reason: "more than one YAML document"}
	}

	c.setDefaults()
	var errs []error
	for _, p := range c.validate() {
		errs = append(errs, &Error{Line: keys.line(p.key), Key: p.key, Reason: p.reason})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &c, nil
}

// key is one mapping key of the document: its dotted path, line and, for a
// scalar value, that value.
type key struct {
	path  string
	line  int
	value string
}

type keyIndex []key

// indexKeys lists every mapping key in document order.
func indexKeys(root *yaml.Node) keyIndex {
	var keys keyIndex
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		switch n.Kind {
		case yaml.DocumentNode, yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c, prefix)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				path := k.Value
				if prefix != "" {
					path = prefix + "." + k.Value
				}
				keys = append(keys, key{path: path, line: k.Line, value: v.Value})
				walk(v, path)
			}
		}
	}
	walk(root, "")
	return keys
}

// line returns the line of the key at path, or of its nearest parent present
// in the file (a missing required key is reported where its parent is), or 0.
func (ix keyIndex) line(path string) int {
	for p := path; p != ""; {
		for _, k := range ix {
			if k.path == p {
				return k.line
			}
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 0
}

// at returns the path of the key on line whose last element is name, or whose
// value is value; failing both, the first key on line. Several keys share a
// line in flow mappings ({a: 1, b: 2}).
func (ix keyIndex) at(line int, name, value string) string {
	first := ""
	for _, k := range ix {
		if k.line != line {
			continue
		}
		if first == "" {
			first = k.path
		}
		if (name != "" && (k.path == name || strings.HasSuffix(k.path, "."+name))) ||
			(value != "" && k.value == value) {
			return k.path
		}
	}
	return first
}

var (
	lineRe    = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	unknownRe = regexp.MustCompile(`^field (\S+) not found in type`)
	valueRe   = regexp.MustCompile("^cannot unmarshal !!\\w+ `(.*)` into (\\S+)$")
	shapeRe   = regexp.MustCompile(`^cannot unmarshal !!(\w+) into (\S+)$`)
)

func syntaxError(err error) error {
	if m := lineRe.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return &Error{Line: n, Reason: m[2]}
	}
	return &Error{Reason: strings.TrimPrefix(err.Error(), "yaml: ")}
}

// decodeError turns the decoder's messages ("line 3: field foo not found in
// type config.Limits") into Errors naming the key and line.
func decodeError(err error, keys keyIndex) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return syntaxError(err)
	}
	var errs []error
	for _, msg := range te.Errors {
		m := lineRe.FindStringSubmatch(msg)
		if m == nil {
			errs = append(errs, &Error{Reason: msg})
			continue
		}
		line, _ := strconv.Atoi(m[1])
		reason := m[2]
		var path string
		if u := unknownRe.FindStringSubmatch(reason); u != nil {
			path, reason = keys.at(line, u[1], ""), "unknown key"
		} else if v := valueRe.FindStringSubmatch(reason); v != nil {
			path, reason = keys.at(line, "", v[1]), fmt.Sprintf("%q is not a valid %s", v[1], typeName(v[2]))
		} else if v := shapeRe.FindStringSubmatch(reason); v != nil {
			path, reason = keys.at(line, "", ""), fmt.Sprintf("a %s is not a valid %s", yamlKind(v[1]), typeName(v[2]))
		} else {
			path = keys.at(line, "", "")
		}
		errs = append(errs, &Error{Line: line, Key: path, Reason: reason})
	}
	return errors.Join(errs...)
}

// typeName says what a Go type is in the file's terms.
func typeName(goType string) string {
	switch {
	case goType == "time.Duration":
		return "duration (e.g. 2s, 500ms)"
	case strings.HasPrefix(goType, "int"):
		return "integer"
	case goType == "bool":
		return "boolean"
	case strings.HasPrefix(goType, "[]"):
		return "list"
	case strings.HasPrefix(goType, "map[") || strings.HasPrefix(goType, "config."):
		return "mapping"
	default:
		return goType
	}
}

func yamlKind(tag string) string {
	switch tag {
	case "map":
		return "mapping"
	case "seq":
		return "list"
	default:
		return tag
	}
}
