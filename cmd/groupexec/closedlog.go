package main

import (
	"os"
	"os/signal"
	"syscall"
)

// survivingClosedLog keeps a serving gateway alive when the reader of its
// log goes away (stderr a pipe to a log shipper that died, or to `head`),
// until the returned function is called.
//
// Go's default for a write to a broken pipe on fd 1 or 2 is to end the
// process with SIGPIPE: the next log line would kill the gateway on the
// spot, its requests in flight cut off and no drain. With SIGPIPE
// notified, the write fails with EPIPE instead, which slog drops: the
// lines logged from then on are lost, and nothing else is. A pipe whose
// reader has gone cannot be read again, and there is nowhere left to say
// so; the gateway's metrics and /readyz still tell its state, and a
// SIGTERM still drains it and exits 0.
//
// Only for the gateway itself: --demo, version and help, which write
// their output and stop, keep the default, so that `groupexec gateway
// --demo | head` ends when head does.
func survivingClosedLog() (stop func()) {
	// Never read: a signal that finds the buffer full is dropped, and
	// notified, SIGPIPE no longer ends the process.
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	return func() { signal.Stop(pipe) }
}
