package grpcadmit

import (
	"context"
	"errors"
	"io"
	"runtime"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/groupexec/groupexec/executor"
)

// StreamClientInterceptor returns an interceptor that admits each outgoing
// stream with ex.DoWeighted before creating it, in the groups
// UnaryClientInterceptor uses (by default one per connection target), with
// the same options, refusals and failure rule (ClientFailure unless
// WithFailure says otherwise). A refused stream is not created: its error
// is a *RefusalError, as for a unary call.
//
// An admitted stream holds its slot for its whole life, like a server
// stream, until gRPC ends it, which is when gRPC itself frees what the
// stream holds:
//   - RecvMsg returns an error: io.EOF after the server's OK status, or the
//     call's status; or RecvMsg returns the reply of a stream whose server
//     does not stream (a client-streaming call's CloseAndRecv);
//   - SendMsg or Header returns an error other than io.EOF;
//   - the stream's context ends (cancelled, its deadline passed), whether
//     the stream is in use or never used after its creation;
//   - the ClientConn is closed;
//   - its creation fails, or panics;
//   - RecvMsg, SendMsg, Header or CloseSend of the stream below panics or
//     exits its goroutine (the panic goes on to the caller; the stream counts as a
//     failure).
//
// The slot is free by the time RecvMsg, SendMsg or Header returns the error
// that ends the stream, and soon after the context ends. As gRPC says of
// NewStream, a stream none of these happen to (a server stream whose
// messages are never read to the end, with a context that never ends)
// keeps what it holds, its slot included: read it to the end or cancel its
// context. The stream's error counts for the group's breaker when the
// stream ends; the end of its context counts as for a unary call (a
// cancellation is no failure, a deadline is one).
//
// Holding the slot takes one goroutine per admitted stream, which waits in
// DoWeighted until the stream ends. The stream is created with the context
// Do gives, which the executor's Close and shutdown deadline also cancel.
// User code that the executor calls on that goroutine before the stream
// is admitted (a rejection handler, a listener) and that calls
// runtime.Goexit ends the interceptor's caller too, as it would end a
// unary call's, on whose goroutine it runs; a panic in the stream
// context's own code there (its Err or Value, as the executor asks them),
// or in the admission that a rejection handler ran on another goroutine
// (RunInCaller), goes on to the caller too, no stream created and the
// slot freed first.
//
// A stream interceptor that opens a stream more than once (one that
// retries a failed attempt) is chained before this one, so that each
// attempt is admitted on its own. Chained after it, it passes on to each
// attempt the call options this interceptor adds (grpc.OnFinish, which
// tells it that gRPC ended the stream), and the end of the first attempt
// ends the admission, and the context the attempts are made with: the
// stream it opens again fails with codes.Canceled, or, when it is opened
// before that context ends, runs without a slot while the group admits
// another in its place.
// It panics if ex is nil or an option is invalid.
func StreamClientInterceptor(ex *executor.Executor, opts ...Option) grpc.StreamClientInterceptor {
	a := newClientAdmitter(ex, opts)
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, callOpts ...grpc.CallOption) (grpc.ClientStream, error) {
		group, weight, err := a.outgoingCall(ctx, cc, method)
		if err != nil {
			return nil, err
		}
		h := &held{a: a, admitted: make(chan struct{}), end: make(chan error, 1), done: make(chan struct{})}
		go h.hold(ctx, group, weight)
		<-h.admitted
		if h.goexited {
			runtime.Goexit() // as the code that exited hold's goroutine did: the slot is free
		}
		if h.raised {
			panic(h.raisedValue) // as the stream's context did on hold's goroutine: the slot is free
		}
		if h.refused != nil {
			return nil, h.refused
		}
		return h.create(desc, cc, method, streamer, callOpts)
	}
}

// held is one outgoing stream's admission: a goroutine in DoWeighted whose
// fn holds the slot until the stream ends (end) or its context does.
type held struct {
	a           *admitter
	ctx         context.Context // fn's: the stream is created with it
	refused     error           // the stream was not admitted, or admitted as its context ended
	goexited    bool            // user code exited hold's goroutine before the caller was told
	raised      bool            // the stream's context panicked on hold's goroutine before the caller was told
	raisedValue any
	admitted    chan struct{} // closed once ctx, refused, goexited or raised is set
	told        atomic.Bool   // admitted is being closed: what it tells is set by the one that swapped it
	end         chan error    // the stream's end, sent once
	ended       atomic.Bool   // end was sent
	done        chan struct{} // Do has returned: the slot is free
}

func (h *held) hold(ctx context.Context, group string, weight int) {
	defer close(h.done)
	defer func() {
		// User code that DoWeighted calls here called runtime.Goexit (a
		// rejection handler, a listener), or panicked (the stream's
		// context, as the executor asks it). No one could recover that
		// panic on this goroutine, the interceptor's: it goes on to the
		// caller instead, which, like a unary call's, would have exited
		// or panicked had it called Do itself, rather than wait for ever.
		// Do has freed the slot. Once the caller is told, a panic later
		// (fn's context, ending) is none of its: the slot is still freed.
		v := recover()
		if h.told.CompareAndSwap(false, true) {
			if v != nil {
				h.raised, h.raisedValue = true, v
			} else {
				h.goexited = true
			}
			close(h.admitted)
		}
	}()
	ran := false
	err := h.a.ex.DoWeighted(ctx, group, weight, func(ctx context.Context) error {
		ran = true
		if err := ctx.Err(); err != nil {
			// Admitted as its context ended: gRPC would fail it at once,
			// unsent, as it would a unary call (UnaryClientInterceptor).
			if h.told.CompareAndSwap(false, true) {
				h.refused = refusal(err, h.a.retryAfter)
				close(h.admitted)
			}
			return errNotSent
		}
		// Asked before the caller is told: it may call the stream
		// context's own code, whose panic must reach the caller.
		done := ctx.Done()
		if !h.told.CompareAndSwap(false, true) {
			// Run by a RunInCaller on another goroutine that won its race
			// with a rejection handler that exited this one: the caller
			// is gone, and no stream will be made.
			return errNotSent
		}
		h.ctx = ctx
		close(h.admitted)
		var err error
		select {
		case err = <-h.end:
		case <-done:
			// gRPC ends the stream too, as it watches the context.
			err = ctx.Err()
		}
		return h.a.outcome(err)
	})
	if h.told.CompareAndSwap(false, true) {
		// fn did not tell the caller: it did not run, or the stream's
		// context panicked in it before it did, on the goroutine a
		// rejection handler ran it on (RunInCaller), which recovered the
		// panic into a *executor.PanicError. The panic goes on to the
		// caller, as on this goroutine.
		var pe *executor.PanicError
		if ran && errors.As(err, &pe) {
			h.raised, h.raisedValue = true, pe.Value
		} else {
			h.refused = refusal(err, h.a.retryFor(err))
		}
		close(h.admitted)
	}
}

// finish tells fn that the stream ended with err (io.EOF: its OK status),
// once; the first end told is the stream's.
func (h *held) finish(err error) {
	if h.ended.CompareAndSwap(false, true) {
		if err == io.EOF {
			err = nil
		}
		h.end <- err
	}
}

// release is finish, returning once the slot is free.
func (h *held) release(err error) {
	h.finish(err)
	<-h.done
}

// errStreamerPanicked is the outcome of a stream whose creation panicked:
// a failure, while the panic goes on to the caller.
var errStreamerPanicked = errors.New("grpcadmit: the stream's creation panicked")

// create creates the stream with the admission's context. gRPC calls
// OnFinish when it ends the stream, however it ends (the ClientConn's Close
// too, which the stream's own methods may never report); the stream's
// methods report its end too, for a streamer chained after this
// interceptor that does not pass the call options on.
func (h *held) create(desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, callOpts []grpc.CallOption) (grpc.ClientStream, error) {
	created := false
	defer func() {
		if !created {
			h.release(errStreamerPanicked)
		}
	}()
	callOpts = append(callOpts[:len(callOpts):len(callOpts)], grpc.OnFinish(h.finish))
	cs, err := streamer(h.ctx, desc, cc, method, callOpts...)
	created = true
	if err != nil {
		h.release(err)
		return nil, err
	}
	return &clientStream{ClientStream: cs, h: h, serverStreams: desc.ServerStreams}, nil
}

// clientStream frees its slot when one of its methods reports that the
// stream has ended, as NewStream's doc lists the ends.
type clientStream struct {
	grpc.ClientStream
	h             *held
	serverStreams bool
}

// A method of the stream below (another interceptor's wrapper, a codec)
// that panics, or exits its goroutine, frees the slot as it goes on to the
// caller: the caller, which cannot use the stream's answer, may well keep
// the stream's context alive, and the slot with it. The stream's
// admission ends as a failure, as a unary call's panic does; the stream's
// context (unless the caller's was context.Background) is cancelled with
// it, which ends the stream too.
var errStreamPanicked = errors.New("grpcadmit: a method of the stream panicked")

func (s *clientStream) RecvMsg(m any) error {
	returned := false
	defer s.endUnlessReturned(&returned)
	err := s.ClientStream.RecvMsg(m)
	returned = true
	if err != nil || !s.serverStreams {
		// A server that does not stream sends one reply, then its
		// status: gRPC has read both and ended the stream.
		s.h.release(err)
	}
	return err
}

func (s *clientStream) SendMsg(m any) error {
	returned := false
	defer s.endUnlessReturned(&returned)
	err := s.ClientStream.SendMsg(m)
	returned = true
	if err != nil && err != io.EOF {
		// io.EOF: the server has ended the stream, whose status RecvMsg
		// reads; gRPC has not ended it yet.
		s.h.release(err)
	}
	return err
}

func (s *clientStream) Header() (metadata.MD, error) {
	returned := false
	defer s.endUnlessReturned(&returned)
	md, err := s.ClientStream.Header()
	returned = true
	if err != nil && err != io.EOF {
		s.h.release(err)
	}
	return md, err
}

// CloseSend ends nothing when it returns, whatever its error (gRPC ends
// the stream on RecvMsg's status): only its panic frees the slot.
func (s *clientStream) CloseSend() error {
	returned := false
	defer s.endUnlessReturned(&returned)
	err := s.ClientStream.CloseSend()
	returned = true
	return err
}

// endUnlessReturned frees the slot if the method it is deferred in did not
// return: it panicked or exited, and the panic goes on, with its stack.
func (s *clientStream) endUnlessReturned(returned *bool) {
	if !*returned {
		s.h.release(errStreamPanicked)
	}
}
