//go:build unix

package config

import (
	"os"
	"syscall"
)

// openFlags opens a file to read without waiting on a named pipe: with
// O_NONBLOCK the open returns at once, and openRegular then refuses it.
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK
