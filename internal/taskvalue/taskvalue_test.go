package taskvalue_test

import (
	"testing"

	"github.com/groupexec/groupexec/internal/taskvalue"
)

func TestIs(t *testing.T) {
	k := taskvalue.New("k")
	if !taskvalue.Is(k) {
		t.Error("a Key is not one")
	}
	if taskvalue.Is("k") || taskvalue.Is(nil) || taskvalue.Is(struct{}{}) {
		t.Error("a key of another type is a Key")
	}
	if taskvalue.New("k") == k {
		t.Error("two keys of one name are one key")
	}
	if k.String() != "k" {
		t.Errorf("String() = %q", k.String())
	}
}
