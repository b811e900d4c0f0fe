package typednil_test

import (
	"testing"
	"unsafe"

	"github.com/groupexec/groupexec/internal/typednil"
)

type (
	fn  func()
	mp  map[int]int
	sl  []int
	ch  chan int
	st  struct{ P *int }
	num int
)

func TestIs(t *testing.T) {
	x := 1
	tests := []struct {
		name string
		v    any
		want bool
	}{
		{"nil", nil, false},
		{"nil pointer", (*int)(nil), true},
		{"nil func", fn(nil), true},
		{"nil map", mp(nil), true},
		{"nil slice", sl(nil), true},
		{"nil chan", ch(nil), true},
		{"nil unsafe pointer", unsafe.Pointer(nil), true},
		{"pointer", &x, false},
		{"func", fn(func() {}), false},
		{"empty map", mp{}, false},
		{"empty slice", sl{}, false},
		{"chan", make(ch), false},
		{"struct holding a nil pointer", st{}, false},
		{"zero int", num(0), false},
	}
	for _, tc := range tests {
		if got := typednil.Is(tc.v); got != tc.want {
			t.Errorf("%s: Is(%T) = %v, want %v", tc.name, tc.v, got, tc.want)
		}
	}
}
