package config_test

import (
	"testing"

	"github.com/groupexec/groupexec/gateway/config"
)

// A number written with a leading 0 is read by the YAML decoder as octal
// where its digits allow (010000 is 4096) and as decimal where they do
// not (0800 is 800): body.max_bytes: 010000 capped bodies at 4 KiB, and
// max_conns: 0700 at 448 connections, without a word. Such a number is
// refused, naming its key, line and what it would have been read as.
func TestNumberWithLeadingZeroRefused(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"body: {max_bytes: 010000}", `config: line 2: body.max_bytes: "010000" has a leading 0, which YAML reads as octal (4096): write the number without it, or with 0o for octal`},
		{"max_conns: 0700", `config: line 2: max_conns: "0700" has a leading 0, which YAML reads as octal (448): write the number without it, or with 0o for octal`},
		{"max_conns: -0_10", `config: line 2: max_conns: "-0_10" has a leading 0, which YAML reads as octal (-8): write the number without it, or with 0o for octal`},
		{"rate_limit: {rps: 010}", `config: line 2: rate_limit.rps: "010" has a leading 0, which YAML reads as octal (8): write the number without it, or with 0o for octal`},
		{"tenants: {vip: {share: 012}}", `config: line 2: tenants.vip.share: "012" has a leading 0, which YAML reads as octal (10): write the number without it, or with 0o for octal`},
	} {
		if _, err := config.Parse([]byte("backends: [http://a:1]\n" + tc.yaml + "\n")); err == nil || err.Error() != tc.want {
			t.Errorf("%q: %v; want %q", tc.yaml, err, tc.want)
		}
	}
	// Written so that they say what they are, or with no other reading,
	// numbers are taken.
	for _, yaml := range []string{
		"max_conns: 0o700", "max_conns: 0x1c0", "max_conns: 448", "max_conns: 1_000",
		"tenant: {max_groups: 0}", "tenant: {max_groups: -0}", "tenant: {max_groups: 007}", "rate_limit: {rps: 0.5}", "max_conns: 1e3",
	} {
		if _, err := config.Parse([]byte("backends: [http://a:1]\n" + yaml + "\n")); err != nil {
			t.Errorf("%q: %v", yaml, err)
		}
	}
}
