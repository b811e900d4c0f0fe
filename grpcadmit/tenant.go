package grpcadmit

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/groupexec/groupexec/httpadmit"
)

// tenantFunc returns a call's tenant key: "" when it names none, or an error
// matching httpadmit.ErrInvalidTenant.
type tenantFunc func(context.Context) (string, error)

// fromMetadata reads the tenant from key in the metadata read gives. An
// absent key names no tenant; a key present more than once, or empty once
// spaces are trimmed, is invalid.
func fromMetadata(key string, read func(context.Context, string) []string) tenantFunc {
	where := "metadata " + key
	return func(ctx context.Context) (string, error) {
		vs := read(ctx, key)
		switch len(vs) {
		case 0:
			return "", nil
		case 1:
			return checked(where, strings.Trim(vs[0], " \t"))
		}
		return "", fmt.Errorf("%w: metadata %s sent %d times", httpadmit.ErrInvalidTenant, key, len(vs))
	}
}

// outgoing returns the outgoing metadata's values for key.
func outgoing(ctx context.Context, key string) []string {
	md, _ := metadata.FromOutgoingContext(ctx)
	return md.Get(key)
}

// fromFunc adapts a user's tenant function.
func fromFunc(f func(context.Context) (string, error)) tenantFunc {
	return func(ctx context.Context) (string, error) {
		key, err := f(ctx)
		if err != nil {
			return "", fmt.Errorf("%w: %w", httpadmit.ErrInvalidTenant, err)
		}
		if key == "" {
			return "", nil
		}
		return checked("tenant function", key)
	}
}

func checked(where, key string) (string, error) {
	if !httpadmit.ValidTenant(key) {
		if len(key) > httpadmit.MaxTenantLen {
			key = key[:httpadmit.MaxTenantLen] + "..."
		}
		return "", fmt.Errorf("%w: %s %q", httpadmit.ErrInvalidTenant, where, key)
	}
	return key, nil
}
