// Package config reads the gateway's YAML configuration file.
//
// Parse turns the file's bytes into a *Config with every omitted key set to
// its documented default, and refuses what it cannot use with an error that
// names the key and its line:
//
//	cfg, err := config.Parse(data)
//	if err != nil {
//		// e.g. `config: line 7: limits.queue_timeuot: unknown key: did you mean queue_timeout?`
//		// errors.Is(err, config.ErrInvalid); errors.As gives *config.Error
//	}
//
// Unknown keys are errors, not warnings: a misspelt limit silently left at its
// default is exactly the kind of mistake an admission gateway must not make.
// Every problem of a file is reported at once, in line order, but within a
// mapping with a key given twice, which the YAML decoder leaves undecoded:
// there the duplicate is reported (each later copy of a key against its
// first), and the mapping's other keys are checked once it is fixed. A
// file with a mapping of more than MaxMappingKeys keys, other than a
// tenants mapping without an anchor, is refused before anything else is
// checked. So is a file the decoder would read otherwise than the checks,
// or refuse without a line, each problem named with its key and line: an
// explicit tag other than the core schema's on what it says (!!str,
// !!int, !!float, !!bool, !!null on a scalar they fit, !!map, !!seq,
// !!merge on <<), the non-specific tag ! (which the decoder drops, where
// YAML makes a scalar so tagged text), an alias as a key (*name: value),
// a merge (<<) of what is no mapping, an alias of an anchor not defined
// before it (which the parser refuses naming neither). !!binary is refused, not decoded:
// every name the config takes is text, written as itself. Loading takes time
// linear in the file, however many tenants it has. A key left out
// takes its default; a key given 0 means 0, valid only where 0 has a meaning
// (each field's comment says which), an error everywhere else; a duration
// is written with its unit (0s: a bare 0 is not a duration). Parse also
// loads the files a config names (TLS certificates, the bearer token's key)
// and checks that body.spool_dir is a directory, and Config.RestartOnly
// names the keys a running gateway cannot change.
// example.yaml in this directory sets every key.
//
// The limits map onto package policy with the same meaning and defaults: a
// limit left out takes policy's default, so Config.Policy builds the same
// policy a Go program would by calling policy.New without that option.
// ExampleParse (example_test.go), run by go test, parses a file and reports
// its errors.
package config
