// Package demo runs the gateway against an embedded backend under a
// synthetic multi-tenant load and prints what each tenant gets, once a
// second: one tenant floods, the others send a light load, and the table
// shows the flood refused at its own limits while the others are served.
//
//	err := demo.Run(ctx, os.Stdout, 10*time.Second)
//
// It is what `groupexec gateway --demo` runs. Everything listens on
// loopback ports chosen by the system, and every load loop stops with Run.
package demo
