package redislimit_test

import (
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
)

// A version rolled out under a new prefix, as the docs say to roll out
// one that reads the Redis keys otherwise, is a limit of its own: on the
// same Redis, a holder of each prefix leases the whole limit of a key at
// once (together, twice it), and the lease taken later under the new
// prefix has the greater fencing token, though it comes from a counter of
// its own: a downstream fencing by key and slot alone refuses the older
// version's writes on its live lease.
func TestANewPrefixIsALimitOfItsOwn(t *testing.T) {
	addr := startRedis(t)
	old := newHolder(t, addr, append(manualRenewals(), redislimit.WithPrefix("t:"+t.Name()+":old"))...)
	cur := newHolder(t, addr, append(manualRenewals(), redislimit.WithPrefix("t:"+t.Name()+":new"))...)
	lo, lc := old.Groups(1), cur.Groups(1)
	no, nc := attach(t, lo), attach(t, lc)

	po := acquire(t, lo, no, "acme", 1, 5*time.Second)
	defer po.Release()
	pc := acquire(t, lc, nc, "acme", 1, 5*time.Second) // the old holder's lease is live
	defer pc.Release()
	fo, ok := redislimit.Fencing(po.Bind(bg, func(error) {}))
	if !ok {
		t.Fatal("no fence for the old prefix's lease")
	}
	fc, ok := redislimit.Fencing(pc.Bind(bg, func(error) {}))
	if !ok {
		t.Fatal("no fence for the new prefix's lease")
	}
	if fo.Slots[0] != 0 || fc.Slots[0] != 0 || fc.Token <= fo.Token {
		t.Fatalf("fences: old %+v, new %+v; want slot 0 each, the new token greater", fo, fc)
	}
}
