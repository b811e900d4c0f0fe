package grpcadmit_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
)

// With WithTransportWatch a handler's grpc.SendHeader on a live transport
// sends its header as without it, and the handler's own Unavailable (its
// database is down) still counts as a failure, opening the breaker. As its
// docs say, grpc.ClientSupportedCompressors (and grpc.SetSendCompressor),
// which need gRPC's own transport stream, then fail; without the option
// they work.
func TestTransportWatchKeepsHeadersAndFailures(t *testing.T) {
	for _, tc := range []struct {
		name           string
		opts           []grpcadmit.Option
		compressorsErr bool
	}{
		{"watched", []grpcadmit.Option{grpcadmit.WithTransportWatch()}, true},
		{"unwatched", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEvents()
			ex := newExec(t, nil, tripOnFirstFailure, ev.listener())
			g := newGate()
			g.release()
			compressorsErr := make(chan error, 1)
			g.reply = func(ctx context.Context, _ string) error {
				_, err := grpc.ClientSupportedCompressors(ctx)
				compressorsErr <- err
				if err := grpc.SendHeader(ctx, metadata.Pairs("x-sent", "header")); err != nil {
					return err
				}
				return status.Error(codes.Unavailable, "the database is down")
			}
			cc := dial(t, start(t, g, grpc.UnaryInterceptor(grpcadmit.UnaryServerInterceptor(ex, tc.opts...))))
			var header metadata.MD
			ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "acme")
			err := cc.Invoke(ctx, "/test.Gate/Call", wrapperspb.String("x"), new(wrapperspb.StringValue), grpc.Header(&header))
			if st := status.Convert(err); st.Code() != codes.Unavailable || st.Message() != "the database is down" {
				t.Fatalf("the call: %v; want the handler's Unavailable", err)
			}
			if got := header.Get("x-sent"); len(got) != 1 || got[0] != "header" {
				t.Errorf("the header the client got: %v; want x-sent: header", header)
			}
			if err := <-compressorsErr; (err != nil) != tc.compressorsErr {
				t.Errorf("grpc.ClientSupportedCompressors: %v; want an error: %v", err, tc.compressorsErr)
			}
			wantCounted(t, ev, ex, "acme", executor.Failed)
		})
	}
}
