package grpcadmit

import (
	"context"

	"google.golang.org/grpc/metadata"

	"github.com/groupexec/groupexec/internal/adapt"
)

// tenantFunc returns a call's tenant key: "" when it names none, or an error
// matching httpadmit.ErrInvalidTenant.
type tenantFunc func(context.Context) (string, error)

// fromMetadata reads the tenant from key in the metadata read gives. An
// absent key names no tenant; a key present more than once, or empty once
// spaces are trimmed, is invalid.
func fromMetadata(key string, read func(context.Context, string) []string) tenantFunc {
	where := "metadata " + key
	return func(ctx context.Context) (string, error) { return adapt.One(where, read(ctx, key)) }
}

// outgoing returns the outgoing metadata's values for key.
func outgoing(ctx context.Context, key string) []string {
	md, _ := metadata.FromOutgoingContext(ctx)
	return md.Get(key)
}

// fromFunc adapts a user's tenant function.
func fromFunc(f func(context.Context) (string, error)) tenantFunc {
	return func(ctx context.Context) (string, error) { return adapt.FromFunc(f(ctx)) }
}
