package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/groupexec/groupexec/gateway"
	"github.com/groupexec/groupexec/gateway/config"
	"github.com/groupexec/groupexec/gateway/demo"
)

func gatewayCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("groupexec gateway", flag.ContinueOnError)
	// The flag package's own words go nowhere: a refused flag is one line
	// naming it as typed (misusedFlag), the help is printed whole only
	// when asked for, to stdout (as groupexec --help's is).
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	path := fs.String("config", "", "the gateway's YAML config `file`")
	demoMode := fs.Bool("demo", false, "run an embedded backend and a synthetic multi-tenant load instead")
	duration := new(time.Duration)
	*duration = 10 * time.Second
	fs.Var((*durationFlag)(duration), "duration", "with --demo, how long to run, a `duration` with its unit: 30s, 5m (0: until interrupted)")
	check := fs.Bool("check", false, "with --config, only check the file (every problem, in line order) and exit")
	logLevel := fs.String("log-level", "info", "the least `level` logged: debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "the log lines' `format`: text (key=value) or json, on stderr")
	help, err := parseThroughHelp(fs, args)
	if err != nil {
		return err
	}
	if help {
		if fs.NArg() > 0 {
			return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
		}
		fmt.Fprint(stdout, "Usage: groupexec gateway --config FILE [--check] [--log-level L] [--log-format F] | --demo [--duration D]\n\n")
		printFlags(stdout, fs)
		return flag.ErrHelp
	}
	if err := givenTwice(fs, args); err != nil {
		return err
	}
	if *duration < 0 {
		return fmt.Errorf("%w: --duration %v: must be >= 0 (0: until interrupted)", errUsage, *duration)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case set["duration"] && !*demoMode:
		return fmt.Errorf("%w: --duration %v: only --demo runs for a duration", errUsage, *duration)
	case *check && *demoMode:
		return fmt.Errorf("%w: --check checks a --config file; --demo has none", errUsage)
	case (set["log-level"] || set["log-format"]) && *demoMode:
		return fmt.Errorf("%w: --log-level and --log-format set the gateway's log; --demo prints a table", errUsage)
	}
	log, err := newLogger(stderr, *logLevel, *logFormat)
	if err != nil {
		return err
	}
	switch {
	// A --config given empty is given: with --demo it is excluded as any
	// other, and alone it names no file (not a --config left out).
	case *demoMode && set["config"]:
		return fmt.Errorf("%w: --demo and --config exclude each other", errUsage)
	case set["config"] && *path == "":
		return fmt.Errorf("%w: --config %q: names no file", errUsage, *path)
	case !*demoMode && *path == "":
		return fmt.Errorf("%w: gateway needs --config FILE or --demo", errUsage)
	case *check:
		// Before SIGINT and SIGTERM are caught: a check has nothing to
		// drain, and one waiting for a file from a pipe that does not
		// come is stopped by the first, as any such command is.
		if _, err := config.Load(*path); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: ok\n", *path)
		return nil
	}
	ctx, stop := signalContext(log, os.Exit)
	defer stop()
	if *demoMode {
		return demo.Run(ctx, stdout, *duration)
	}
	// Through the last line written: a gateway that fails exits 1, as
	// documented, even with its log's reader gone.
	defer survivingClosedLog()()
	err = serveFile(ctx, *path, log)
	switch {
	case err == nil:
		return nil
	case strings.EqualFold(*logFormat, "json"):
		// A JSON log stays JSON to its last line: a gateway that could
		// not start (a file refused, an address taken) or that stopped
		// on an error says so in a record, which a log pipeline reads
		// as it reads the rest. The text log keeps the plain line, the
		// clearer to a person at a terminal.
		log.Error("gateway failed", "err", err.Error())
	default:
		fmt.Fprintf(stderr, "groupexec: %v\n", err)
	}
	return loggedError{err}
}

// loggedError is an error that the gateway's log has reported: the command
// exits 1 without writing it again.
type loggedError struct{ error }

func (e loggedError) Unwrap() error { return e.error }

// serveFile runs the gateway of the config file at path until ctx ends, or
// until it fails, reloading the file on SIGHUP.
func serveFile(ctx context.Context, path string, log *slog.Logger) error {
	// SIGHUP reloads the file. It is caught from before the file is read:
	// its default action ends the process, and one sent while the gateway
	// starts (a reload right after a deploy) is a reload once it serves.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	if !hupCaughtToExit {
		defer signal.Stop(hup)
	}
	cfg, err := loadUnlessStopped(ctx, path, log)
	if err != nil || cfg == nil {
		return err
	}
	pl, al, err := gateway.Listen(cfg)
	if err != nil {
		return err
	}
	gw, err := gateway.New(cfg, gateway.WithLogger(log), gateway.WithConfigFile(path))
	if err != nil {
		pl.Close()
		al.Close()
		return err
	}
	if stdLogToGateway {
		// What the standard library writes with the log package's
		// default logger (net/http's transport: bytes a backend sent on
		// an idle connection) goes to the gateway's log, in its format
		// and within its rate, not as plain lines on stderr among the
		// JSON records.
		stdlog.SetFlags(0)
		stdlog.SetOutput(gw.ErrorLog().Writer())
	}
	// A bad file is logged and the old config kept. SIGHUP reloads until
	// Serve returns, through the drain too, as POST /reload does: a reload
	// during drain_delay sets the drain_timeout that follows it.
	served := make(chan struct{})
	reloaded := make(chan struct{})
	go func() {
		defer close(reloaded)
		reloadOnSignal(hup, served, gw, log)
	}()
	err = gw.Serve(ctx, pl, al)
	close(served)
	<-reloaded
	return err
}

// loadUnlessStopped loads the config file at path, or returns nil, nil
// once ctx ends first: a file read from a pipe (--config /dev/stdin) may
// keep the load waiting for its writer, and SIGINT and SIGTERM, caught
// from the start for the drain, would otherwise stop nothing until it
// came. There is no gateway yet to drain: the command exits 0, as it does
// for a signal just after the load, and the load left waiting ends with
// the process.
func loadUnlessStopped(ctx context.Context, path string, log *slog.Logger) (*config.Config, error) {
	type loaded struct {
		cfg *config.Config
		err error
	}
	done := make(chan loaded, 1)
	go func() {
		cfg, err := config.Load(path)
		done <- loaded{cfg, err}
	}()
	select {
	case l := <-done:
		return l.cfg, l.err
	case <-ctx.Done():
	}
	select {
	case l := <-done:
		// Loaded as the signal came: served and drained at once, as it
		// always was, or refused.
		return l.cfg, l.err
	default:
		log.Info("stopped before the config file was read: nothing to drain", "config", path)
		return nil, nil
	}
}

// newLogger returns the gateway's logger, writing to w from level on in
// format, or a usage error naming the flag and the value it refuses.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	switch strings.ToLower(level) {
	case "debug", "info", "warn", "error":
		lv.UnmarshalText([]byte(level)) // cannot fail on these
	default:
		return nil, fmt.Errorf("%w: --log-level %q: must be debug, info, warn or error", errUsage, level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("%w: --log-format %q: must be text or json", errUsage, format)
}

// reloadOnSignal reloads gw's file for each signal on hup, until served
// closes or a reload finds gw closed. A file refused is logged and the old
// config kept. Serve closes the gateway before it returns: a signal
// arriving then reloads nothing, and is no refused file of a running
// gateway.
func reloadOnSignal(hup <-chan os.Signal, served <-chan struct{}, gw *gateway.Gateway, log *slog.Logger) {
	for {
		select {
		case <-served:
			return
		case <-hup:
			err := gw.ReloadFile()
			switch {
			case errors.Is(err, gateway.ErrClosed):
				log.Info("SIGHUP after the gateway closed: not reloaded")
				return
			case err != nil:
				log.Error("config reload refused, the old config is kept", "err", err.Error())
			}
		}
	}
}

// sameStop is how long after the first SIGINT or SIGTERM another is taken
// for the same stop, sent twice, and not for an operator's second:
// timeout(1) signals the process and then its process group, and a
// supervisor may signal twice alike, microseconds apart. The runtime
// delivers both when it has handled the first in between, and the second
// would cut off the drain the first began.
const sameStop = time.Second

// signalContext returns a context that the first SIGINT or SIGTERM ends,
// which drains the gateway (or ends the demo). Another one, during the
// drain and sameStop or more after the first, calls exit(1) at once:
// drain_delay + drain_timeout can be minutes, and an operator who signals
// again will not wait for them, as with most servers. stop releases the
// signals.
func signalContext(log *slog.Logger, exit func(int)) (ctx context.Context, stop func()) {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	ctx, release := stopContext(sig, log, exit, time.Now)
	return ctx, func() {
		signal.Stop(sig)
		release()
	}
}

// stopContext is signalContext's watch over sig, with now telling the
// time (tests).
func stopContext(sig <-chan os.Signal, log *slog.Logger, exit func(int), now func() time.Time) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		var first time.Time
		select {
		case <-sig:
			first = now()
			cancel()
		case <-done:
			return
		}
		for {
			select {
			case s := <-sig:
				if now().Sub(first) < sameStop {
					continue // the first, sent again
				}
				// Logged as the gateway logs, so that a JSON log stays
				// JSON to its last line.
				log.Error("second signal: stopping without finishing the drain", "signal", s.String())
				exit(1)
				return
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			close(done)
			<-watched
			cancel()
		})
	}
}
