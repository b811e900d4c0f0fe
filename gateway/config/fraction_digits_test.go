package config_test

import (
	"strings"
	"testing"

	"github.com/groupexec/groupexec/gateway/config"
)

// A fraction too small for a float64 to hold is a fraction still: the
// decoder reads "5.0000000000000001" as the float 5, which passed for an
// integer, and the file's fraction was cut without a word, where 5.5 is
// refused. The number is read from its text, as written.
func TestFractionBeyondAFloatsDigitsIsNotAnInteger(t *testing.T) {
	for _, tc := range []struct{ yaml, key, value string }{
		{"max_conns: 5.0000000000000001", "max_conns", "5.0000000000000001"},
		{"tenants: {vip: {share: 2.00000000000000001}}", "tenants.vip.share", "2.00000000000000001"},
		{"body: {max_bytes: 1.0000000000000000001e3}", "body.max_bytes", "1.0000000000000000001e3"},
	} {
		_, err := config.Parse([]byte("backends: [http://a:1]\n" + tc.yaml + "\n"))
		if err == nil || !strings.Contains(err.Error(), tc.key+`: "`+tc.value+`" is not a valid integer`) {
			t.Errorf("%s: %v; want %s: %q is not a valid integer", tc.yaml, err, tc.key, tc.value)
		}
	}
	// An integral value written with a fraction of zeros, or an exponent,
	// is the integer it is.
	c, err := config.Parse([]byte("backends: [http://a:1]\nmax_conns: 5.000000000000000000\nbody: {max_bytes: 1_000.0}\ntenants: {vip: {share: 2e0}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxConns != 5 || c.Body.MaxBytes != 1000 || *c.Tenants["vip"].Share != 2 {
		t.Errorf("got %d, %d, %d; want 5, 1000, 2", c.MaxConns, c.Body.MaxBytes, *c.Tenants["vip"].Share)
	}
}
