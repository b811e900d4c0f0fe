package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A SIGTERM sent twice at once (timeout(1) signals the process, then its
// process group) is one stop: the drain goes on. Another signal sameStop
// after the first is an operator's second, and stops the process.
func TestSignalSentTwiceAtOnceDrains(t *testing.T) {
	sig := make(chan os.Signal) // unbuffered: a send returns once the watch has it
	times := make(chan time.Time)
	exits := make(chan int, 4)
	var logged bytes.Buffer // written by the watch, read once it has ended
	log := slog.New(slog.NewJSONHandler(&logged, nil))
	ctx, stop := stopContext(sig, log, func(code int) { exits <- code }, func() time.Time { return <-times })
	defer stop()

	// deliver hands the watch s and tells it the time is at, which it
	// reads once for each signal; it fails if the watch stopped the
	// process before taking s. The watch takes signals in turn, so a
	// signal taken means the ones before it were dealt with.
	start := time.Unix(0, 0)
	deliver := func(s os.Signal, at time.Duration, what string) {
		t.Helper()
		select {
		case sig <- s:
		case code := <-exits:
			t.Fatalf("exit(%d) before %s", code, what)
		}
		times <- start.Add(at)
	}
	deliver(syscall.SIGTERM, 0, "the first signal")
	<-ctx.Done()
	deliver(syscall.SIGTERM, 0, "the first signal sent again")
	deliver(syscall.SIGTERM, sameStop-time.Nanosecond, "a signal just under sameStop after the first")
	deliver(syscall.SIGINT, sameStop, "an operator's second signal")
	stop() // waits for the watch to end
	close(exits)
	var got []int
	for code := range exits {
		got = append(got, code)
	}
	if len(got) != 1 || got[0] != 1 {
		t.Fatalf("exit calls %v; want one, exit(1), for the signal sameStop after the first", got)
	}
	// The second signal is said in the gateway's log, in its format.
	var line struct{ Level, Msg, Signal string }
	if err := json.Unmarshal(logged.Bytes(), &line); err != nil || line.Level != "ERROR" ||
		!strings.HasPrefix(line.Msg, "second signal") || line.Signal != syscall.SIGINT.String() {
		t.Errorf("logged %q (%v); want one JSON line at ERROR saying the second signal, interrupt", logged.String(), err)
	}
}
