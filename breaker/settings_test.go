package breaker_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/internal/clocktest"
)

func TestNewRejectsNegativeDurations(t *testing.T) {
	for _, tc := range []struct {
		field string
		s     breaker.Settings
	}{
		{"Interval", breaker.Settings{Interval: -time.Nanosecond}},
		{"Timeout", breaker.Settings{Timeout: -time.Second}},
		{"Interval", breaker.Settings{Interval: -1, Timeout: -1}}, // the first invalid field is named
	} {
		cb, err := breaker.New(tc.s)
		if cb != nil || err == nil {
			t.Fatalf("New(%+v) = %v, %v; want nil and an error", tc.s, cb, err)
		}
		if !errors.Is(err, breaker.ErrInvalidSettings) {
			t.Errorf("error %v does not match ErrInvalidSettings", err)
		}
		var se *breaker.SettingsError
		if !errors.As(err, &se) || se.Field != tc.field {
			t.Errorf("error %v: want a *SettingsError for field %s", err, tc.field)
		}
		if !strings.Contains(err.Error(), tc.field) {
			t.Errorf("error %q does not name %s", err, tc.field)
		}
	}
}

func TestZeroSettingsAreValid(t *testing.T) {
	cb, err := breaker.New(breaker.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, cb, breaker.StateClosed)
	wantCounts(t, cb, breaker.Counts{})
	if cb.Name() != "" {
		t.Errorf("Name() = %q", cb.Name())
	}
	if got := mustNew(t, breaker.Settings{Name: "db"}).Name(); got != "db" {
		t.Errorf("Name() = %q, want db", got)
	}
}

func TestStateString(t *testing.T) {
	for s, want := range map[breaker.State]string{
		breaker.StateClosed:   "closed",
		breaker.StateOpen:     "open",
		breaker.StateHalfOpen: "half-open",
		breaker.State(7):      "State(7)",
	} {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", int(s), got, want)
		}
	}
}

func TestRealClockByDefault(t *testing.T) {
	// With the system clock and a 1ns timeout, the breaker is half-open by
	// the time anyone asks; no sleep needed.
	cb := mustNew(t, breaker.Settings{Timeout: time.Nanosecond})
	trip(t, cb)
	for cb.State() == breaker.StateOpen { // the clock has to move past 1ns
		wantErrIn(t, run(cb, true), nil, breaker.ErrOpenState)
	}
	wantState(t, cb, breaker.StateClosed)
}

func wantErrIn(t *testing.T, got error, want ...error) {
	t.Helper()
	for _, w := range want {
		if got == w {
			return
		}
	}
	t.Fatalf("error %v, want one of %v", got, want)
}

// A Clock holding a nil pointer is refused by New, naming the field: the
// breaker reads its clock only when time matters, so it would otherwise
// panic long after New, on the failure that trips it.
func TestNewRejectsNilPointerClock(t *testing.T) {
	var fake *clock.Fake
	cb, err := breaker.New(breaker.Settings{Clock: fake})
	if cb != nil || !errors.Is(err, breaker.ErrInvalidSettings) {
		t.Fatalf("New with a nil *clock.Fake = %v, %v; want nil and ErrInvalidSettings", cb, err)
	}
	var se *breaker.SettingsError
	if !errors.As(err, &se) || se.Field != "Clock" || !strings.Contains(err.Error(), "*clock.Fake(nil)") {
		t.Errorf("error %v: want a *SettingsError naming Clock and the nil *clock.Fake", err)
	}
	// A nil Clock is the default, clock.Real.
	if _, err := breaker.New(breaker.Settings{Clock: nil}); err != nil {
		t.Errorf("New with a nil Clock: %v", err)
	}
}

// A Clock holding a nil function, map, slice or channel is refused as a nil
// pointer is: a nil function's or slice's Now panics, a nil channel's
// blocks for good, a nil map's reads the zero time, all long after New.
func TestNewRejectsTypedNilClocks(t *testing.T) {
	for _, c := range clocktest.Nils() {
		cb, err := breaker.New(breaker.Settings{Clock: c})
		if cb != nil || !errors.Is(err, breaker.ErrInvalidSettings) {
			t.Errorf("New with a nil %T = %v, %v; want nil and ErrInvalidSettings", c, cb, err)
			continue
		}
		var se *breaker.SettingsError
		if !errors.As(err, &se) || se.Field != "Clock" || !strings.Contains(err.Error(), fmt.Sprintf("%T(nil)", c)) {
			t.Errorf("error %v: want a *SettingsError naming Clock and the nil %T", err, c)
		}
	}
	// The same kinds, not nil, are clocks like any other.
	for _, c := range append(clocktest.At(t0), make(clocktest.Chan)) {
		if _, err := breaker.New(breaker.Settings{Clock: c}); err != nil {
			t.Errorf("New with a %T: %v", c, err)
		}
	}
}
