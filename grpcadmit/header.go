package grpcadmit

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// SendHeader sends md as the header of the call ctx is the context of, as
// grpc.SendHeader does, for handlers behind the server interceptors: its
// error, when gRPC's transport is closing under the call (codes.Unavailable:
// the client closed its connection, or the server stops), is marked so
// that the interceptor counts a handler that returns it, or wraps it, as
// Cancelled, not as a failure of its group's breaker. Its code, message
// and errors.Is are grpc.SendHeader's error's; any other error, and nil,
// is returned unchanged.
//
// grpc.SendHeader's error goes past the interceptor, which sees only what
// the handler returns: gRPC fails a closing transport's sends a moment
// before it ends the call's context, and a handler that returns at once
// returns Unavailable on a context still alive, which ServerFailure
// counts. Any client could then open its tenant's breaker by making calls
// and closing its connection (WithTransportWatch has the interceptors see
// grpc.SendHeader's error too, at the price it names). A stream's own
// SendHeader and SendMsg need nothing: the interceptor sees them through
// the stream it hands the handler. grpc.SetHeader and grpc.SetTrailer, which send nothing, need
// nothing either.
func SendHeader(ctx context.Context, md metadata.MD) error {
	err := grpc.SendHeader(ctx, md)
	if err != nil && status.Code(err) == codes.Unavailable {
		return &closingError{err}
	}
	return err
}

// closingError is SendHeader's error for a transport closing under the
// call. It is made in this process only, never decoded from the wire: a
// dependency's Unavailable, or a client's, cannot pass for one.
type closingError struct{ err error }

func (e *closingError) Error() string              { return e.err.Error() }
func (e *closingError) Unwrap() error              { return e.err }
func (e *closingError) GRPCStatus() *status.Status { return status.Convert(e.err) }

// headerClosed reports whether err is, or wraps, SendHeader's error for a
// transport closing under the call.
func headerClosed(err error) bool {
	var ce *closingError
	return errors.As(err, &ce)
}

// errHeaderClosed is the outcome of a call whose handler returned
// SendHeader's error for a transport closing under the call: Cancelled,
// as a stream's send error is (errSendClosed).
var errHeaderClosed = fmt.Errorf("grpcadmit: the handler returned SendHeader's error, the transport closing under the call: %w", context.Canceled)
