package config

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// readNamedFile returns the contents of a file the config names (a TLS
// certificate, key or CA, the bearer token's key), which is read at load
// and again on every reload. It must be a regular file (a symlink to one
// is followed, as Kubernetes mounts secrets) of at most MaxFileBytes. The
// open does not wait on a named pipe, and the read stops past the cap:
// os.ReadFile waited forever on a pipe nobody wrote to, holding a reload
// (and the drain behind it) for good, and read /dev/zero until the
// process ran out of memory, a fatal error and not one to recover from.
// A pipe can be read once only, so a reload could never read it again;
// a device holds no key.
func readNamedFile(path string) ([]byte, error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readCapped(f, path)
}

// openRegular opens path to read, without waiting on a named pipe, and
// returns an error naming it unless it is a regular file.
func openRegular(path string) (*os.File, error) {
	// openFlags has O_NONBLOCK where there is one: opening a named pipe
	// to read otherwise waits for a writer. The file's type is taken from
	// the file opened, not from the path before the open, which a swap
	// of the path (a ConfigMap's symlink) could change in between.
	f, err := os.OpenFile(path, openFlags, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &notRegularError{path: path, mode: fi.Mode()}
	}
	return f, nil
}

// notRegularError is openRegular's refusal of a path that is no regular
// file.
type notRegularError struct {
	path string
	mode os.FileMode
}

func (e *notRegularError) Error() string {
	return fmt.Sprintf("%s is not a regular file (%s)", e.path, fileKind(e.mode))
}

// fileKind names the type of a file that is not a regular one.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return m.Type().String()
}

// errTooLarge is readCapped's refusal of a file over MaxFileBytes.
var errTooLarge = errors.New("larger than 64 MiB")

// readCapped reads r whole, refusing, with an error naming path, more than
// MaxFileBytes.
func readCapped(r io.Reader, path string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s is %w", path, errTooLarge)
	}
	return data, nil
}
