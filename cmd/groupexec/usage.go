package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// gatewayHelpHint ends each usage error of groupexec gateway: the error
// says what is wrong in one line, and the flags are a command away rather
// than printed in full under it, where they pushed the cause out of sight.
const gatewayHelpHint = "run 'groupexec gateway --help' for the flags"

// printFlags writes fs's flags as the flag package's PrintDefaults does,
// each named with two dashes as the help and the docs write them (the
// flag package takes both and writes one).
func printFlags(w io.Writer, fs *flag.FlagSet) {
	var b bytes.Buffer
	out := fs.Output()
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(out)
	w.Write(flagLine.ReplaceAll(b.Bytes(), []byte("  --$1")))
}

// flagLine is the start of a line of PrintDefaults naming a flag; a line
// of its usage text starts with spaces and a tab.
var flagLine = regexp.MustCompile(`(?m)^  -([^-\s])`)

// misusedFlag returns a usage error for the first argument of args that
// fs.Parse refuses, naming the flag as args spell it ("--bogus" where the
// flag package says "-bogus"), nil where it finds none. It reads args by
// the flag package's rules: flags end at the first argument that is not
// one, or after "--"; a flag's value is after "=" or, but for a bool
// flag, the next argument.
func misusedFlag(fs *flag.FlagSet, args []string) error {
	for len(args) > 0 {
		s := args[0]
		if len(s) < 2 || s[0] != '-' {
			return nil
		}
		args = args[1:]
		if s == "--" {
			return nil
		}
		dashes := "-"
		if s[1] == '-' {
			dashes = "--"
		}
		name, value, hasValue := strings.Cut(s[len(dashes):], "=")
		if name == "" || name[0] == '-' {
			return fmt.Errorf("%w: bad flag syntax %q", errUsage, s)
		}
		spelt := dashes + name
		f := fs.Lookup(name)
		if f == nil {
			return fmt.Errorf("%w: unknown flag %s", errUsage, spelt)
		}
		isBool := isBoolFlag(f)
		switch {
		case hasValue:
		case isBool:
			value = "true"
		case len(args) == 0:
			return fmt.Errorf("%w: %s needs a value", errUsage, spelt)
		default:
			value, args = args[0], args[1:]
		}
		if err := refused(f, value); err != nil {
			if isBool {
				// The flag package's own says "parse error".
				return fmt.Errorf("%w: %s=%s: must be true or false", errUsage, spelt, value)
			}
			return fmt.Errorf("%w: %s %q: %v", errUsage, spelt, value, err)
		}
	}
	return nil
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// refused returns the error f's type gives s, set on a fresh value of that
// type (f's own keeps what the command line set), nil where it takes s.
func refused(f *flag.Flag, s string) error {
	fresh, ok := freshValue(f)
	if !ok {
		return nil
	}
	return fresh.Set(s)
}

// parseThroughHelp parses args into fs, reading on past each help flag
// (--help, -h, -help), where the flag package stops: "gateway --help
// extra" would print the help and drop the word that "gateway extra
// --help" refuses, and a flag misspelt after the help flag would pass
// unseen. help says a help flag was given; err is the usage error of the
// first argument refused, before or after one.
func parseThroughHelp(fs *flag.FlagSet, args []string) (help bool, err error) {
	for {
		err = fs.Parse(args)
		if !errors.Is(err, flag.ErrHelp) {
			break
		}
		help = true
		args = fs.Args() // what follows the help flag
	}
	if err != nil {
		// misusedFlag reads the arguments that fs.Parse refused, which
		// hold no help flag before the one it stopped at.
		if misused := misusedFlag(fs, args); misused != nil {
			return help, misused
		}
		return help, fmt.Errorf("%w: %v", errUsage, err) // one misusedFlag does not read as fs does
	}
	return help, nil
}
