package gateway

import "errors"

var (
	// ErrInvalidTenant marks a request whose tenant key breaks
	// config.ValidTenant; it is answered 400.
	ErrInvalidTenant = errors.New("gateway: invalid tenant key")
	// ErrBodyTooLarge marks a request body over body.max_bytes, or a gzip body
	// whose decoded size is over body.max_decoded_bytes or body.max_ratio
	// times its size; it is answered 413.
	ErrBodyTooLarge = errors.New("gateway: request body too large")
	// ErrAborted is the cause of the context of a request cancelled because
	// it was still running when the drain deadline passed.
	ErrAborted = errors.New("gateway: request aborted at the drain deadline")
	// errBackendStatus is a proxied task's error when the backend answered
	// 5xx, so that the tenant's breaker counts it as a failure.
	errBackendStatus = errors.New("gateway: backend answered 5xx")
)
