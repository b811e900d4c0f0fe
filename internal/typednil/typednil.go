// Package typednil tells whether a value given for an interface is a typed
// nil: a nil pointer, function, map, slice or channel held in an interface.
// Such an interface is not nil, so a check for nil lets it through, and its
// methods fail later, far from the option or field that took it: a nil
// pointer's or function's panic, a nil slice's index out of range, a nil
// channel's receive blocking for good. Constructors refuse one where nil is
// refused, or where nil means a default.
package typednil

import "reflect"

// Is reports whether v, not nil itself, holds a nil pointer, function, map,
// slice or channel.
func Is(v any) bool {
	if v == nil {
		return false
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Map, reflect.Slice, reflect.Chan, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}
