package main

import (
	"flag"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"
)

// givenTwice returns a usage error for the first flag of fs that args give
// twice with two values, nil if none. The flag package keeps the last
// value and drops the first without a word: a --config a wrapper passes
// and one its operator adds would run whichever came last, and
// "--log-level debug ... --log-level error" would log errors alone. The
// same value twice says one thing, and is taken, spelt the same or not
// ("--check=1 --check", "--duration 1s --duration 1000ms", "--log-level
// debug --log-level DEBUG"). args are parsed again on a set of the same
// flags that only records what each is given: fs has parsed them
// already, and reported what it could not.
func givenTwice(fs *flag.FlagSet, args []string) error {
	seen := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	seen.SetOutput(io.Discard)
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		b, ok := f.Value.(interface{ IsBoolFlag() bool })
		seen.Var(&firstValue{flag: f, isBool: ok && b.IsBoolFlag(), err: &err}, f.Name, "")
	})
	_ = seen.Parse(args)
	return err
}

// firstValue records the first value its flag is given, and sets *err when
// it is given another.
type firstValue struct {
	flag   *flag.Flag
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
	case *v.err == nil && valueOf(v.flag, s) != valueOf(v.flag, *v.first):
		*v.err = fmt.Errorf("%w: --%s given twice, %q and then %q: give it once", errUsage, v.flag.Name, *v.first, s)
	}
	return nil
}

// caseless are the flags whose values are words read without regard to
// case.
var caseless = map[string]bool{"log-level": true, "log-format": true}

// valueOf is the value s gives flag f, as its type writes it ("1" and
// "TRUE" are true, "1000ms" is 1s), or s itself where f's type refuses
// it (the flag's own parse has said so).
func valueOf(f *flag.Flag, s string) string {
	if caseless[f.Name] {
		return strings.ToLower(s)
	}
	fresh, ok := freshValue(f)
	if !ok || fresh.Set(s) != nil {
		return s
	}
	return fresh.String()
}

// freshValue returns a new value of f's type, to set without touching f's
// own; false where f's type is not a pointer, whose new value would be
// nil.
func freshValue(f *flag.Flag) (flag.Value, bool) {
	t := reflect.TypeOf(f.Value)
	if t.Kind() != reflect.Pointer {
		return nil, false
	}
	fresh, ok := reflect.New(t.Elem()).Interface().(flag.Value)
	return fresh, ok
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
