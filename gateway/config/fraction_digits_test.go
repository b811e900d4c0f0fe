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

// An integer written as a float (a fraction of zeros, an exponent) with
// more digits than a float64 holds is refused rather than rounded: the
// decoder reads it as a float, and 9007199254740993.0 bytes were
// 9007199254740992, a value the file does not have.
func TestIntegerBeyondAFloatsDigitsIsRefused(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"body: {max_bytes: 9007199254740993.0}",
			`line 2: body.max_bytes: "9007199254740993.0" is read as a float, 9007199254740992: write the integer without a fraction or an exponent`},
		{"tenant: {max_groups: 123456789.123456789e9}",
			`line 2: tenant.max_groups: "123456789.123456789e9" is read as a float, 123456789123456784: write the integer without a fraction or an exponent`},
	} {
		_, err := config.Parse([]byte("backends: [http://a:1]\n" + tc.yaml + "\n"))
		if err == nil || err.Error() != "config: "+tc.want {
			t.Errorf("%s: %v; want config: %s", tc.yaml, err, tc.want)
		}
	}
	// What a float64 holds is taken, however written.
	c, err := config.Parse([]byte("backends: [http://a:1]\nbody: {max_bytes: 9007199254740992.0, max_decoded_bytes: 1.25e17}\ntenant: {max_groups: 0.0e1000000}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Body.MaxBytes != 9007199254740992 || c.Body.MaxDecodedBytes != 125000000000000000 || c.Tenant.MaxGroups != 0 {
		t.Errorf("got %d, %d, %d", c.Body.MaxBytes, c.Body.MaxDecodedBytes, c.Tenant.MaxGroups)
	}
}
