package config

import (
	"bytes"
	"fmt"
	"unicode/utf8"
)

// unreadableByte returns the error for the first character of data that
// the YAML reader refuses, with its line, or nil if it finds none. The
// reader's error names the problem alone ("control characters are not
// allowed"), and the byte, which does not show in an editor, could be
// anywhere in the file. A file in UTF-16 (the reader takes one with its
// byte order mark) is left to the reader's error.
func unreadableByte(data []byte) *Error {
	if bytes.HasPrefix(data, []byte("\xff\xfe")) || bytes.HasPrefix(data, []byte("\xfe\xff")) {
		return nil
	}
	line := 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			return &Error{Line: line, Reason: fmt.Sprintf("invalid UTF-8 (byte %#x): a config file is UTF-8 text", data[i])}
		case !yamlPrintable(r):
			return &Error{Line: line, Reason: fmt.Sprintf("control characters are not allowed (%U)", r)}
		}
		// A line ends as the reader counts lines: at LF, CR and CRLF,
		// NEL, LS and PS.
		switch r {
		case '\r':
			if i+1 < len(data) && data[i+1] == '\n' {
				break
			}
			line++
		case '\n', '\u0085', '\u2028', '\u2029':
			line++
		}
		i += size
	}
	return nil
}

// yamlPrintable reports whether a YAML stream may hold r (YAML 1.2,
// c-printable).
func yamlPrintable(r rune) bool {
	switch {
	case r == '\t', r == '\n', r == '\r', r == 0x85:
	case r >= 0x20 && r <= 0x7e:
	case r >= 0xa0 && r <= 0xd7ff:
	case r >= 0xe000 && r <= 0xfffd:
	case r >= 0x10000 && r <= 0x10ffff:
	default:
		return false
	}
	return true
}
