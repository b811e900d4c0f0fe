// Command groupexec is groupexec's HTTP admission gateway.
//
//	groupexec gateway --config gateway.yaml   run the gateway
//	groupexec gateway --config gateway.yaml --check   check the config file
//	groupexec gateway --demo [--duration 10s] watch isolation on a synthetic load
//	groupexec version                         print the version
//
// The gateway itself is package gateway; this command parses flags, loads
// the config, listens and turns SIGINT and SIGTERM into a graceful drain.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

const usage = `groupexec: an HTTP admission gateway built on a grouped executor.

Usage:
  groupexec gateway --config FILE           run the gateway described by FILE (YAML);
                                            --log-level debug|info|warn|error (default
                                            info) and --log-format text|json (default
                                            text) set its log, on stderr (a log
                                            whose reader has gone loses its lines;
                                            the gateway goes on serving)
  groupexec gateway --config FILE --check   check FILE (every problem, in line order)
  groupexec gateway --demo [--duration D]   run an embedded backend and a synthetic
                                            multi-tenant load; print per-tenant stats
                                            every second for D (default 10s; 0: until
                                            interrupted)
  groupexec gateway --help                  print the gateway's flags
  groupexec version                         print the version
  groupexec help                            print this help

SIGINT or SIGTERM drains the gateway: /readyz fails (and the gateway goes on
serving for drain_delay), the listener closes, in-flight requests get
drain_timeout to finish, and the process exits 0; a second SIGINT or SIGTERM
during the drain, a second or more after the first, stops the process at
once, exit status 1. SIGHUP (or POST /reload on the admin address) reloads
the config file in place; a file with errors, or one changing a key that
needs a restart, is refused and the old config kept.

Exit status: 2 for a command line it cannot use (a line on stderr says
why); 1 for a config file it refuses (--check too), a gateway that fails
to start or serve, or a demo that did not show isolation.
`

// errUsage marks a command line that could not be understood: exit 2.
var errUsage = errors.New("usage")

func main() {
	stdLogToGateway = true
	hupCaughtToExit = true
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// stdLogToGateway points the standard logger at the gateway's log once the
// gateway is built (gatewayCmd): set by main only, since the standard
// logger is the process's, and the tests run the command in theirs.
var stdLogToGateway bool

// hupCaughtToExit keeps SIGHUP caught once the gateway has stopped, until
// the process exits: released, its default action ended the process, so
// that one more SIGHUP of a reload storm (a config sync signalling each
// change) arriving after the drain turned its exit 0, or the exit 1 of a
// gateway that could not start, into death by SIGHUP (status 129). Set by
// main only, as stdLogToGateway is: the tests run the command in their
// process, and leave the signal as they found it.
var hupCaughtToExit bool

// run executes the command line args and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	var err error
	var hint string // the line under a usage error, if any
	switch cmd := first(args); cmd {
	case "gateway":
		err = gatewayCmd(args[1:], stdout, stderr)
		hint = gatewayHelpHint
	case "version", "--version", "-version":
		if len(args) > 1 {
			// Not ignored: a flag such as --short would be taken for one
			// that works.
			err = fmt.Errorf("%w: %s takes no arguments, got %q", errUsage, cmd, args[1])
			break
		}
		fmt.Fprintln(stdout, versionString())
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			// Not ignored, as with version: "help gateway" would print
			// this help as if it were the gateway's.
			err = fmt.Errorf("%w: %s takes no arguments, got %q (groupexec gateway --help prints the gateway's flags)", errUsage, cmd, args[1])
			break
		}
		fmt.Fprint(stdout, usage)
	case "":
		fmt.Fprint(stderr, usage)
		return 2
	default:
		fmt.Fprintf(stderr, "groupexec: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "groupexec: %v\n", err)
		if hint != "" {
			fmt.Fprintln(stderr, hint)
		}
		return 2
	case errors.As(err, new(loggedError)):
		return 1
	default:
		fmt.Fprintf(stderr, "groupexec: %v\n", err)
		return 1
	}
}

func first(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}
