package gateway

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"os"
	"sync"

	"github.com/groupexec/groupexec/gateway/config"
)

// spool holds a request body received before admission: in memory up to
// its threshold, in a temporary file beyond it, as nginx's request
// buffering does. The file is removed as soon as it is created (on Unix it
// lives until closed), so a crash leaves nothing behind.
type spool struct {
	mem       *bytes.Buffer // pooled; nil until the first write
	file      *os.File
	fileSize  int64
	threshold int64
	dir       string
	out       *spoolBody // the body handed to the transport, if any

	// The file's bytes are counted in use against lim's caps, as client's
	// if counted, before they are written; reserved of them so far, given
	// back by release. use is nil for a spool without caps.
	use      *spoolUse
	lim      *config.Body
	client   netip.Prefix
	counted  bool
	reserved int64

	failed error // why the file could not be made or written, for the log
}

// spoolBody is a spool's body on its way to the backend. The transport may
// read it on its own goroutine, even after the response has come back (the
// proxy's Close of it does not wait for a read in progress): stop waits for
// such a read and fails later ones, so that the spool's memory can be
// reused.
type spoolBody struct {
	mu      sync.Mutex
	r       io.Reader
	stopped bool
}

func (b *spoolBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return 0, errSpoolReleased
	}
	return b.r.Read(p)
}

func (b *spoolBody) Close() error { return nil }

func (b *spoolBody) stop() {
	b.mu.Lock()
	b.stopped = true
	b.mu.Unlock()
}

var errSpoolReleased = errors.New("gateway: the request body was read after its request ended")

var memPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// putBuffer gives *b back to memPool, unless it grew past maxPooled, and
// sets it to nil.
func putBuffer(b **bytes.Buffer) {
	if *b != nil && (*b).Cap() <= maxPooled {
		(*b).Reset()
		memPool.Put(*b)
	}
	*b = nil
}

// maxPooled is the largest buffer put back in memPool: a rare huge body
// must not pin its memory in the pool.
const maxPooled = 1 << 20

func (s *spool) size() int64 {
	n := s.fileSize
	if s.mem != nil {
		n += int64(s.mem.Len())
	}
	return n
}

// Write appends p: to memory up to the threshold, the rest to the file.
// Memory is filled first, so that the bytes in the file, which the spool's
// caps count, are the body's beyond the threshold, however its reads cut
// it.
func (s *spool) Write(p []byte) (int, error) {
	if s.file == nil {
		if s.mem == nil {
			s.mem = memPool.Get().(*bytes.Buffer)
		}
		room := s.threshold - int64(s.mem.Len())
		if int64(len(p)) <= room {
			return s.mem.Write(p)
		}
		s.mem.Write(p[:room])
		n, err := s.toFile(p[room:])
		return int(room) + n, err
	}
	return s.toFile(p)
}

// toFile appends p to the file, made on the first call.
func (s *spool) toFile(p []byte) (int, error) {
	if err := s.reserve(len(p)); err != nil {
		return 0, err
	}
	if s.file == nil {
		f, err := os.CreateTemp(s.dir, "groupexec-body-*")
		if err != nil {
			s.failed = err
			return 0, err
		}
		os.Remove(f.Name())
		s.file = f
	}
	n, err := s.file.Write(p)
	s.fileSize += int64(n)
	if err != nil {
		s.failed = err
	}
	return n, err
}

// reserve counts n bytes about to be written to the file against the
// spool's caps: a body over them is refused before it takes the room.
func (s *spool) reserve(n int) error {
	if s.use == nil {
		return nil
	}
	// A body whose own bytes in the file pass a cap can never be
	// received, however long its client waits: it is too large, not
	// refused for a spool full of others'.
	if mine := s.reserved + int64(n); mine > s.lim.SpoolMaxBytes || s.counted && mine > s.lim.SpoolMaxBytesPerClient {
		return errSpoolSize
	}
	if err := s.use.reserve(int64(n), s.lim, s.client, s.counted); err != nil {
		return err
	}
	s.reserved += int64(n)
	return nil
}

// body returns the body from its start, for the transport.
func (s *spool) body() io.ReadCloser {
	var mem io.Reader = bytes.NewReader(nil)
	if s.mem != nil {
		mem = bytes.NewReader(s.mem.Bytes())
	}
	if s.file != nil {
		mem = io.MultiReader(mem, io.NewSectionReader(s.file, 0, s.fileSize))
	}
	s.out = &spoolBody{r: mem}
	return s.out
}

// release stops the body handed out, closes the file, gives its bytes
// back to the caps and returns the memory to the pool. It runs once a
// request has ended, however it ended (answered, refused, cut short,
// panicking), and again harmlessly.
func (s *spool) release() {
	if s.out != nil {
		s.out.stop()
		s.out = nil
	}
	if s.file != nil {
		s.file.Close()
		s.file = nil
	}
	if s.reserved > 0 {
		s.use.giveBack(s.reserved, s.client, s.counted)
		s.reserved = 0
	}
	s.use, s.lim = nil, nil
	putBuffer(&s.mem)
	s.fileSize, s.failed = 0, nil
}
