package policy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/policy"
)

// An option refused for a group of a megabyte names the group by its first
// 128 bytes and how many more it has, and so does a resolver's invalid
// answer for one: quoted whole, a client's key made each message a
// megabyte. OptionError.Group keeps the whole key.
func TestErrorsQuoteALongGroupCut(t *testing.T) {
	mega := strings.Repeat("g", 1<<20)
	cut := `"` + strings.Repeat("g", 128) + `"... (1048448 more bytes)`
	_, err := policy.New(policy.WithGroupShare(mega, 0))
	var oe *policy.OptionError
	if !errors.As(err, &oe) || oe.Group != mega {
		t.Fatalf("err = %.400v; want an *OptionError with the whole group", err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "policy: WithGroupShare("+cut+", 0): ") || len(msg) > 512 {
		t.Errorf("the message (%d bytes) is %.400s; want the group cut", len(msg), msg)
	}
	p, err := policy.New(policy.WithShareResolver(func(string) (int, bool) { return 0, true }))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Group(mega)
	if msg := errString(err); !strings.Contains(msg, " for group "+cut+": ") || len(msg) > 512 {
		t.Errorf("the resolver's error (%d bytes) is %.400s; want the group cut", len(msg), msg)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
