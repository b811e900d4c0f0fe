package main

import (
	"flag"
	"fmt"
	"io"
	"time"
)

// givenTwice returns a usage error for the first flag of fs that args give
// twice with two values, nil if none. The flag package keeps the last
// value and drops the first without a word: a --config a wrapper passes
// and one its operator adds would run whichever came last, and
// "--log-level debug ... --log-level error" would log errors alone. The
// same value twice says one thing, and is taken. args are parsed again on
// a set of the same flags that only records what each is given: fs has
// parsed them already, and reported what it could not.
func givenTwice(fs *flag.FlagSet, args []string) error {
	seen := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	seen.SetOutput(io.Discard)
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		b, ok := f.Value.(interface{ IsBoolFlag() bool })
		seen.Var(&firstValue{name: f.Name, isBool: ok && b.IsBoolFlag(), err: &err}, f.Name, "")
	})
	_ = seen.Parse(args)
	return err
}

// firstValue records the first value its flag is given, and sets *err when
// it is given another.
type firstValue struct {
	name   string
	isBool bool
	first  *string
	err    *error
}

func (v *firstValue) String() string { return "" }

func (v *firstValue) IsBoolFlag() bool { return v.isBool }

func (v *firstValue) Set(s string) error {
	switch {
	case v.first == nil:
		v.first = &s
	case s != *v.first && *v.err == nil:
		*v.err = fmt.Errorf("%w: --%s given twice, %q and then %q: give it once", errUsage, v.name, *v.first, s)
	}
	return nil
}

// durationFlag is a time.Duration flag whose refusal says why: the flag
// package's own Duration says "parse error" of every value it cannot read,
// and "--duration 5", a duration without its unit, is the usual one.
type durationFlag time.Duration

func (d *durationFlag) String() string { return time.Duration(*d).String() }

func (d *durationFlag) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return err // time: missing unit in duration "5"
	}
	*d = durationFlag(v)
	return nil
}
