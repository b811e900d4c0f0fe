package gateway

import "errors"

var (
	// ErrInvalidTenant marks a request whose tenant key breaks
	// config.ValidTenant; it is answered 400.
	ErrInvalidTenant = errors.New("gateway: invalid tenant key")
	// ErrUnauthenticated marks a request whose credentials (the bearer
	// token of tenant.from: bearer, the client certificate of client_cert)
	// were refused or name no tenant; it is answered 401.
	ErrUnauthenticated = errors.New("gateway: unauthenticated")
	// ErrAborted is the cause of the context of a request cancelled because
	// it was still running when the drain deadline passed.
	ErrAborted = errors.New("gateway: request aborted at the drain deadline")
	// ErrClosed is Reload's and ReloadFile's error once Close has been
	// called (by Serve, at the end of its drain): a closed gateway's
	// executor takes no limits, and a config applied to it would be in
	// force nowhere.
	ErrClosed = errors.New("gateway: closed")
	// errBackendStatus is a proxied task's error when the backend answered
	// 5xx, so that the tenant's breaker counts it as a failure.
	errBackendStatus = errors.New("gateway: backend answered 5xx")
)
