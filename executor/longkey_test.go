package executor_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// A key of a megabyte, as a client may send for its tenant.
var (
	megaGroup = strings.Repeat("g", 1<<20)
	megaID    = strings.Repeat("i", 1<<20)
)

// quotedCut is how an error quotes a key of a megabyte of c: its first 128
// bytes and how many more it has.
func quotedCut(c string) string {
	return `"` + strings.Repeat(c, 128) + `"... (1048448 more bytes)`
}

// A refusal's message quotes a group key or ID over 128 bytes by its first
// 128 bytes and how many more it has: quoted whole, a client's key of a
// megabyte made every logged refusal a megabyte. The fields keep the whole
// value.
func TestRefusalQuotesALongKeyCut(t *testing.T) {
	for _, e := range []*executor.RejectedError{
		{Group: megaGroup, Limit: executor.LimitGroupQueue, Weight: 1},
		{Group: megaGroup, ID: megaID, Limit: executor.LimitShutdown, Err: executor.ErrShutdown},
	} {
		msg := e.Error()
		want := "executor: task of group " + quotedCut("g")
		if e.ID != "" {
			want = "executor: task " + quotedCut("i") + " of group " + quotedCut("g")
		}
		if !strings.HasPrefix(msg, want+" rejected by ") || len(msg) > 512 {
			t.Errorf("the message (%d bytes) starts %.400s; want %s rejected by ...", len(msg), msg, want)
		}
	}
}

// Through the executor: a resolver's invalid answer for a group of a
// megabyte refuses its task with a message of a few hundred bytes, the
// policy's cause included, and the refusal's Group is the whole key.
func TestResolverRefusalOfALongKeyCut(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithMaxInFlightResolver(func(string) (int, bool) { return 0, true })})
	err := ex.Do(bg, megaGroup, func(context.Context) error { return nil })
	var rej *executor.RejectedError
	if !errors.As(err, &rej) || rej.Limit != executor.LimitResolver || rej.Group != megaGroup {
		t.Fatalf("err = %.400v; want a refusal by the resolver naming the whole group", err)
	}
	msg := err.Error()
	if strings.Count(msg, quotedCut("g")) != 2 || len(msg) > 1024 {
		t.Errorf("the message (%d bytes) is %.600s; want the group cut twice (refusal and cause)", len(msg), msg)
	}
}

// SetGroupLimits and ResetGroupLimits name a group of a megabyte cut too.
func TestLimitErrorsQuoteALongKeyCut(t *testing.T) {
	ex := newExec(t, nil)
	check := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "("+quotedCut("g")+")") || len(err.Error()) > 512 {
			t.Errorf("%s: the error (%d bytes) is %.400v; want the group cut", what, len(errString(err)), err)
		}
	}
	check("SetGroupLimits, invalid limits", ex.SetGroupLimits(megaGroup, policy.GroupLimits{}))
	if err := ex.Shutdown(bg); err != nil {
		t.Fatal(err)
	}
	check("SetGroupLimits, shut down", ex.SetGroupLimits(megaGroup, policy.GroupLimits{MaxInFlight: 1, MaxConcurrency: 1, Share: 1}))
	check("ResetGroupLimits, shut down", ex.ResetGroupLimits(megaGroup))

	// A resolver's invalid answer as the reset resolves the group afresh.
	ex = newExec(t, []policy.Option{policy.WithMaxInFlightResolver(func(string) (int, bool) { return 0, true })})
	if err := ex.SetGroupLimits(megaGroup, policy.GroupLimits{MaxInFlight: 1, MaxConcurrency: 1, Share: 1}); err != nil {
		t.Fatalf("SetGroupLimits: %.400v", err)
	}
	check("ResetGroupLimits, invalid resolver", ex.ResetGroupLimits(megaGroup))
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
