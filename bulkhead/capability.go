package bulkhead

import "context"

type capabilityKey struct{}

// capabilities is a context's set of capabilities, as a list that shares
// its tail with the parent context's.
type capabilities struct {
	name string
	next *capabilities
}

// WithCapability returns a copy of ctx that carries the named capability, in
// addition to any it carried. A nil ctx panics, as context.WithValue does.
func WithCapability(ctx context.Context, name string) context.Context {
	if ctx == nil {
		// context.WithValue's panic, which says what is wrong, rather
		// than a nil pointer dereference from reading ctx first.
		return context.WithValue(ctx, capabilityKey{}, nil)
	}
	parent, _ := ctx.Value(capabilityKey{}).(*capabilities)
	return context.WithValue(ctx, capabilityKey{}, &capabilities{name, parent})
}

// HasCapability reports whether ctx carries the named capability.
func HasCapability(ctx context.Context, name string) bool {
	if ctx == nil {
		return false
	}
	for c, _ := ctx.Value(capabilityKey{}).(*capabilities); c != nil; c = c.next {
		if c.name == name {
			return true
		}
	}
	return false
}

// admits reports whether ctx carries the capability b requires, if any.
func (b *Bulkhead) admits(ctx context.Context) bool {
	return b.capability == "" || HasCapability(ctx, b.capability)
}
