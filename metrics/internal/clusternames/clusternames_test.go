package clusternames

import (
	"reflect"
	"testing"

	"github.com/groupexec/groupexec/cluster/redislimit"
)

// TestEveryStatHasAnEntry: every counter of redislimit.Stats is read by
// one of Counters, and every level by one of Gauges, so that a field added
// to Stats is exported by both adapters or fails here. Mode and Policy are
// cluster_up's value and label.
func TestEveryStatHasAnEntry(t *testing.T) {
	typ := reflect.TypeFor[redislimit.Stats]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		var s redislimit.Stats
		v := reflect.ValueOf(&s).Elem().Field(i)
		readers := 0
		switch f.Type.Kind() {
		case reflect.Uint64:
			v.SetUint(7)
			for _, c := range Counters {
				if c.Get(s) == 7 {
					readers++
				}
			}
		case reflect.Int:
			v.SetInt(7)
			for _, g := range Gauges {
				if g.Get(s) == 7 {
					readers++
				}
			}
		default:
			if f.Type != reflect.TypeFor[redislimit.Mode]() && f.Type != reflect.TypeFor[redislimit.FailurePolicy]() {
				t.Errorf("Stats.%s, a %v, is neither a counter nor a level: export it", f.Name, f.Type)
			}
			continue
		}
		if readers != 1 {
			t.Errorf("Stats.%s is read by %d entries, want 1", f.Name, readers)
		}
	}
	if n := len(Counters) + len(Gauges); n != typ.NumField()-2 {
		t.Errorf("%d entries for %d counters and levels of Stats", n, typ.NumField()-2)
	}
}
