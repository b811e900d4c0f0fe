package grpcadmit

import (
	"context"
	"errors"
	"io"
	"reflect"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

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
// cancellation is no failure, a deadline is one). An error that SendMsg
// itself returns (other than io.EOF and the end of the context) is, as
// grpc.ClientStream's SendMsg says, the client's own: a message that does
// not encode (a proto3 string holding invalid UTF-8), a SendMsg after
// CloseSend. The stream then counts as Cancelled, not as a failure of
// the dependency, whose breaker a caller's bad input would open for
// every caller.
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
// WithFailure's function judges the stream's end on that goroutine, where
// no one could recover its panic: as a unary call's, the panic goes on to
// the caller, raised by the first of the stream's methods (RecvMsg,
// SendMsg, Header, CloseSend) to return once the slot is free, the one
// that reports the end, or the caller's next call after an end that gRPC
// reported on its own goroutine (the stream's context ended, the
// ClientConn closed); by the interceptor itself when the stream's
// creation failed. It goes on once; a runtime.Goexit there ends the
// caller's goroutine likewise. The stream counts as failed, its outcome
// wrapping an *executor.PanicError with the panic's value and stack, which
// the listener sees whether or not the caller calls the stream again. A
// method of the stream below that panics itself has its own panic go on
// instead.
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

	// Set by fn before done is closed, read once it is (raiseJudged).
	judgeFailed bool        // WithFailure's function panicked, or exited, as it judged the stream's end
	judgeValue  any         // its panic's value; nil for runtime.Goexit
	judgeRaised atomic.Bool // the panic went on to the caller, or another did

	mu          sync.Mutex
	sending     bool          // SendMsg is in flight: an end waits for it (finish)
	deferred    bool          // an end came while it was
	deferredErr error         // the first such end's error
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
		if err := endedErr(ctx); err != nil {
			// Admitted as its context ended, or past its deadline by the
			// clock: gRPC would fail it at once, unsent, as it would a
			// unary call (clientCall.run).
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
		return h.judge(err)
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

// finish is gRPC's OnFinish: it tells fn that gRPC ended the stream with
// err (tell). While SendMsg is in flight, the end waits for it to return:
// gRPC ends the stream with the error SendMsg returns before it returns
// it, and only SendMsg's wrapper, which sees that error, can tell that it
// is the client's own (sendEnded). SendMsg returns once gRPC has ended the
// stream, whoever ended it. The stream's own methods tell their ends
// directly.
func (h *held) finish(err error) {
	h.mu.Lock()
	if h.sending {
		if !h.deferred {
			h.deferred, h.deferredErr = true, err
		}
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	h.tell(err)
}

// tell tells fn that the stream ended with err (io.EOF: its OK status),
// once; the first end told is the stream's.
func (h *held) tell(err error) {
	if h.ended.CompareAndSwap(false, true) {
		if err == io.EOF {
			err = nil
		}
		h.end <- err
	}
}

// judge returns outcome's verdict on the stream's end err. WithFailure's
// function runs here, on hold's goroutine (or the one a rejection handler
// ran fn on), where no one could recover its panic: the panic, or a
// runtime.Goexit, is kept for the stream's caller (raiseJudged), as a
// unary call's goes on to its caller, and the stream counts as failed,
// its outcome carrying the panic's value and stack, which the listener
// and Stats see even if the caller never calls the stream again.
func (h *held) judge(err error) (outcome error) {
	judged := false
	defer func() {
		if judged {
			return
		}
		v := recover() // nil: a runtime.Goexit, which goes on
		h.judgeFailed, h.judgeValue = true, v
		outcome = &judgePanicError{&executor.PanicError{Value: v, Stack: debug.Stack()}}
	}()
	outcome = h.a.outcome(err)
	judged = true
	return outcome
}

// judgePanicError is the outcome of a stream whose end WithFailure's
// function panicked as it judged: a failure, wrapping the panic.
type judgePanicError struct{ panic *executor.PanicError }

func (e *judgePanicError) Error() string {
	return "grpcadmit: the WithFailure function panicked as it judged the stream's end: " + e.panic.Error()
}

// Unwrap returns the *executor.PanicError.
func (e *judgePanicError) Unwrap() error { return e.panic }

// raiseJudged goes on, in the stream's caller, with the panic (or the
// runtime.Goexit) of WithFailure's function as it judged the stream's end,
// once the slot is free, once per stream. It is called by each method of
// the stream as it returns, and by the interceptor once a failed creation
// is judged: the call that reports the end, or the caller's next call
// after an end that came otherwise (gRPC's OnFinish, on its own goroutine,
// as the stream's context ended or its ClientConn closed).
func (h *held) raiseJudged() {
	select {
	case <-h.done:
	default:
		return // not ended yet, or not judged yet
	}
	if !h.judgeFailed || !h.judgeRaised.CompareAndSwap(false, true) {
		return
	}
	if h.judgeValue == nil {
		runtime.Goexit()
	}
	panic(h.judgeValue)
}

// release is tell, returning once the slot is free.
func (h *held) release(err error) {
	h.tell(err)
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
		h.raiseJudged()
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
	s.h.raiseJudged()
	return err
}

func (s *clientStream) SendMsg(m any) (err error) {
	h := s.h
	h.mu.Lock()
	h.sending = true // gRPC's SendMsg is not called on two goroutines at once
	h.mu.Unlock()
	returned := false
	defer func() {
		h.mu.Lock()
		h.sending = false
		deferred, end := h.deferred, h.deferredErr
		h.deferred, h.deferredErr = false, nil
		h.mu.Unlock()
		switch {
		case !returned:
			h.releasePanicked() // the panic goes on, with its stack
		case deferred && err != io.EOF && sameError(end, err):
			// gRPC ended the stream with SendMsg's own error.
			h.release(sendEnded(err))
		case deferred:
			// Ended otherwise while SendMsg was in flight (RecvMsg read
			// the server's status, the ClientConn closed).
			h.release(end)
		case err != nil && err != io.EOF:
			// A stream below that does not pass OnFinish on. io.EOF: the
			// server has ended the stream, whose status RecvMsg reads;
			// gRPC has not ended it yet.
			h.release(sendEnded(err))
		}
		if returned {
			h.raiseJudged()
		}
	}()
	err = s.ClientStream.SendMsg(m)
	returned = true
	return err
}

// sendEnded is the outcome of a stream that SendMsg's error err ended.
// gRPC returns from SendMsg itself only errors of the client's (as
// ClientStream.SendMsg says; a failure of the server's is io.EOF, and
// RecvMsg reads its status): a message that does not encode (a proto3
// string holding invalid UTF-8, from a caller's input), one over the
// size limit, a SendMsg after CloseSend. None is the dependency's
// failure, and one caller's bad input must not open its breaker for all:
// Cancelled. The end of the stream's context (Canceled,
// DeadlineExceeded) counts as it does anywhere else, and so does an
// error wrapping io.EOF, which gRPC's retries return for a server's
// status once their attempts are exhausted.
func sendEnded(err error) error {
	switch status.Code(err) {
	case codes.Canceled, codes.DeadlineExceeded:
		return err
	}
	if errors.Is(err, io.EOF) {
		return err
	}
	return &unsentError{err}
}

// sameError reports whether a and b are one error value; false where ==
// would panic (an error whose dynamic type is not comparable).
func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	return va.Type() == vb.Type() && va.Comparable() && vb.Comparable() && a == b
}

// unsentError is the outcome of a stream whose message SendMsg failed to
// send, an error of this process: Cancelled, its error kept.
type unsentError struct{ err error }

func (e *unsentError) Error() string {
	return "grpcadmit: the stream's message was not sent, an error of this process: " + e.err.Error()
}

// Unwrap returns the error and context.Canceled.
func (e *unsentError) Unwrap() []error { return []error{e.err, context.Canceled} }

func (s *clientStream) Header() (metadata.MD, error) {
	returned := false
	defer s.endUnlessReturned(&returned)
	md, err := s.ClientStream.Header()
	returned = true
	if err != nil && err != io.EOF {
		s.h.release(err)
	}
	s.h.raiseJudged()
	return md, err
}

// CloseSend ends nothing when it returns, whatever its error (gRPC ends
// the stream on RecvMsg's status): only its panic frees the slot.
func (s *clientStream) CloseSend() error {
	returned := false
	defer s.endUnlessReturned(&returned)
	err := s.ClientStream.CloseSend()
	returned = true
	s.h.raiseJudged()
	return err
}

// endUnlessReturned frees the slot if the method it is deferred in did not
// return: it panicked or exited, and the panic goes on, with its stack.
func (s *clientStream) endUnlessReturned(returned *bool) {
	if !*returned {
		s.h.releasePanicked()
	}
}

// releasePanicked frees the slot of a stream whose method panicked, or
// exited its goroutine. A panic of WithFailure's function as it judged
// that end is dropped: the method's own goes on, and the outcome keeps
// the other.
func (h *held) releasePanicked() {
	h.release(errStreamPanicked)
	h.judgeRaised.Store(true)
}
