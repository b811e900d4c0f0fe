package executor_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// Every error New returns matches ErrInvalidOption, names the option and
// value in its text, and still matches what it wraps (a breaker's
// *SettingsError, a limiter's Attach error).
func TestNewErrorsMatchErrInvalidOption(t *testing.T) {
	p, err := policy.New()
	if err != nil {
		t.Fatal(err)
	}
	attachErr := errors.New("bad limit 0")
	refusing := newMemLimiter()
	refusing.attachE = attachErr
	for _, tc := range []struct {
		name  string
		p     *policy.Policy
		opts  []executor.Option
		text  string // in the error's text
		under error  // matched too, if not nil
	}{
		{"nil policy", nil, nil, "New(nil)", nil},
		{"zero policy", &policy.Policy{}, nil, "zero policy.Policy", nil},
		{"nil Option", p, []executor.Option{nil}, "nil Option", nil},
		{"listener twice", p, []executor.Option{executor.WithListener(executor.ListenerFuncs{}), executor.WithListener(executor.ListenerFuncs{})}, "given twice", nil},
		{"nil clock", p, []executor.Option{executor.WithClock(nil)}, "WithClock(nil)", nil},
		{"negative max idle groups", p, []executor.Option{executor.WithMaxIdleGroups(-1)}, "WithMaxIdleGroups(-1)", nil},
		{"nil spawn", p, []executor.Option{executor.WithSpawn(nil)}, "WithSpawn(nil)", nil},
		{"breaker settings", p, []executor.Option{executor.WithGroupBreaker(breaker.Settings{Timeout: -time.Second})}, "WithGroupBreaker", breaker.ErrInvalidSettings},
		{"nil limiter", p, []executor.Option{executor.WithGlobalLimiter(nil)}, "WithGlobalLimiter(nil)", nil},
		{"limiter refusing to attach", p, []executor.Option{executor.WithGroupLimiter(refusing)}, "bad limit 0", attachErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex, err := executor.New(tc.p, tc.opts...)
			if err == nil {
				ex.Close()
				t.Fatal("New succeeded")
			}
			if !errors.Is(err, executor.ErrInvalidOption) || !strings.Contains(err.Error(), tc.text) {
				t.Errorf("New: %v, want an error matching ErrInvalidOption naming %q", err, tc.text)
			}
			if tc.under != nil && !errors.Is(err, tc.under) {
				t.Errorf("New: %v, want it to match %v too", err, tc.under)
			}
		})
	}
}
