//go:build !unix

package config

import "os"

// openFlags opens a file to read. Opening a named pipe does not wait for
// a writer outside Unix.
const openFlags = os.O_RDONLY
