// Package config reads the gateway's YAML configuration file.
//
// Parse turns the file's bytes into a *Config with every omitted key set to
// its documented default, and refuses what it cannot use with an error that
// names the key and its line:
//
//	cfg, err := config.Parse(data)
//	if err != nil {
//		// e.g. `config: line 7: limits.queue_timeuot: unknown key`
//		// errors.Is(err, config.ErrInvalid); errors.As gives *config.Error
//	}
//
// Unknown keys are errors, not warnings: a misspelt limit silently left at its
// default is exactly the kind of mistake an admission gateway must not make.
//
// The limits map onto package policy with the same meaning and defaults: a
// limit left out takes policy's default, so Config.Policy builds the same
// policy a Go program would by calling policy.New without that option.
package config
