package config

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// source is the file's text as the YAML parser reads it, so that the
// place of a node (its line and column) can be found in it: what the
// parser does not keep in the node tree (a non-specific tag "!", an alias
// of an anchor it does not know) is read there. It is read forward, as
// the tree's nodes come in document order: a node's place is found from
// the last one's, so that a walk of the tree reads the text once. An
// index of every line would cost more than the file for a file of empty
// lines, and a decode from a line's start the square of a long line.
type source struct {
	text      []byte
	line, col int // of text[i], as the parser counts them from 1
	i         int
	restarts  int // the times a node before the last one was asked for
}

// newSource returns data's source: UTF-16 (by its byte order mark) read
// as the parser converts it, and a UTF-8 byte order mark skipped.
func newSource(data []byte) *source {
	return &source{text: utf8Text(data), line: 1, col: 1}
}

// breakLen returns the length of the line break b starts with, 0 if none.
func breakLen(b []byte) int {
	switch {
	case b[0] == '\r' && len(b) > 1 && b[1] == '\n':
		return 2
	case b[0] == '\r' || b[0] == '\n':
		return 1
	case bytes.HasPrefix(b, []byte("\u0085")):
		return 2
	case bytes.HasPrefix(b, []byte("\u2028")), bytes.HasPrefix(b, []byte("\u2029")):
		return 3
	}
	return 0
}

// utf8Text returns data as UTF-8, without a byte order mark.
func utf8Text(data []byte) []byte {
	var big bool
	switch {
	case bytes.HasPrefix(data, []byte{0xef, 0xbb, 0xbf}):
		return data[3:]
	case bytes.HasPrefix(data, []byte{0xff, 0xfe}):
	case bytes.HasPrefix(data, []byte{0xfe, 0xff}):
		big = true
	default:
		return data
	}
	units := make([]uint16, 0, len(data)/2)
	for i := 2; i+1 < len(data); i += 2 {
		if big {
			units = append(units, uint16(data[i])<<8|uint16(data[i+1]))
		} else {
			units = append(units, uint16(data[i+1])<<8|uint16(data[i]))
		}
	}
	var text []byte
	for _, r := range utf16.Decode(units) {
		text = utf8.AppendRune(text, r)
	}
	return text
}

// at returns the text from where n starts to the end, or nil when n has
// no place in the text. The parser counts columns in characters, and ends
// a line at CR LF, CR, LF, or one of NEL (U+0085), LS (U+2028) and PS
// (U+2029). A node before the last one asked for is found from the
// start.
func (s *source) at(n *yaml.Node) []byte {
	if n.Line < s.line || n.Line == s.line && n.Column < s.col {
		s.line, s.col, s.i = 1, 1, 0
		s.restarts++
	}
	for s.line < n.Line || s.col < n.Column {
		if s.i >= len(s.text) {
			return nil
		}
		if b := breakLen(s.text[s.i:]); b > 0 {
			if s.line == n.Line {
				return nil // past the end of its line
			}
			s.i += b
			s.line, s.col = s.line+1, 1
			continue
		}
		_, size := utf8.DecodeRune(s.text[s.i:])
		s.i += size
		s.col++
	}
	return s.text[s.i:]
}

// nonSpecificTag reports whether n was written with the non-specific tag
// "!" (`limit: ! 5`), which the parser drops from the node tree: the node
// reads as if untagged, and its place in the text starts with the tag, or
// with its anchor and then the tag.
func (s *source) nonSpecificTag(n *yaml.Node) bool {
	if n.Style&yaml.TaggedStyle != 0 || n.Kind == yaml.DocumentNode || n.Kind == yaml.AliasNode {
		return false
	}
	if n.Kind == yaml.MappingNode && len(n.Content) > 0 && n.Content[0].Line == n.Line && n.Content[0].Column == n.Column {
		// A block mapping starts where its first key does: a tag there
		// is the key's.
		return false
	}
	b := s.at(n)
	if n.Anchor != "" && bytes.HasPrefix(b, []byte("&"+n.Anchor)) {
		b = skipSeparation(b[1+len(n.Anchor):])
	}
	return len(b) > 0 && b[0] == '!'
}

// skipSeparation returns b after the spaces, tabs, line breaks and
// comments it starts with: what may separate a node's anchor from its tag.
func skipSeparation(b []byte) []byte {
	for len(b) > 0 {
		switch n := breakLen(b); {
		case b[0] == ' ' || b[0] == '\t':
			b = b[1:]
		case n > 0:
			b = b[n:]
		case b[0] == '#':
			for len(b) > 0 && breakLen(b) == 0 {
				b = b[1:]
			}
		default:
			return b
		}
	}
	return b
}
