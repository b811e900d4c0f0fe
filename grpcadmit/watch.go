package grpcadmit

import (
	"context"
	"errors"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// sendWatch keeps the error a send of a call returned as its transport
// closed under it. Its zero value keeps nothing yet; a nil one never keeps.
type sendWatch struct {
	sendErr atomic.Pointer[error]
}

// sent keeps err, a send's error, if its code is Unavailable, which gRPC's
// own server stream answers a send with only when its transport is
// closing (the client closed the connection, or the server stops); a
// message that does not encode is Internal, the handler's own failure.
func (w *sendWatch) sent(err error) {
	if status.Code(err) == codes.Unavailable {
		w.sendErr.Store(&err)
	}
}

// sendFailed reports whether the handler's error err is, or wraps, one a
// send of its call returned as the transport closed (sent).
func (w *sendWatch) sendFailed(err error) bool {
	if w == nil || err == nil {
		return false
	}
	p := w.sendErr.Load()
	return p != nil && errors.Is(err, *p)
}

// watched returns ctx with gRPC's transport stream of its call
// (grpc.ServerTransportStreamFromContext) wrapped, so that the error of a
// grpc.SendHeader through it is kept in w, with WithTransportWatch; or ctx
// unchanged, when a's option is off or ctx has no transport stream (a test
// calling an interceptor).
func (a *admitter) watched(ctx context.Context, w *sendWatch) context.Context {
	if !a.watchTransport {
		return ctx
	}
	ts := grpc.ServerTransportStreamFromContext(ctx)
	if ts == nil {
		return ctx
	}
	return grpc.NewContextWithServerTransportStream(ctx, &watchedTransport{ts, w})
}

// watchedTransport is gRPC's transport stream of a call, whose SendHeader
// keeps an error that says the transport closed under the call (sent).
// grpc.SendHeader sends through it; gRPC passes such an error on as it is.
type watchedTransport struct {
	grpc.ServerTransportStream
	w *sendWatch
}

func (t *watchedTransport) SendHeader(md metadata.MD) error {
	err := t.ServerTransportStream.SendHeader(md)
	if err != nil {
		t.w.sent(err)
	}
	return err
}
