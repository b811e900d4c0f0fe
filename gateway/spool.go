package gateway

import (
	"bytes"
	"errors"
	"io"
	"os"
	"sync"
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

// Write appends p: to memory while the total stays within the threshold,
// then to the file.
func (s *spool) Write(p []byte) (int, error) {
	if s.file == nil {
		if s.mem == nil {
			s.mem = memPool.Get().(*bytes.Buffer)
		}
		if int64(s.mem.Len()+len(p)) <= s.threshold {
			return s.mem.Write(p)
		}
		f, err := os.CreateTemp(s.dir, "groupexec-body-*")
		if err != nil {
			return 0, err
		}
		os.Remove(f.Name())
		s.file = f
	}
	n, err := s.file.Write(p)
	s.fileSize += int64(n)
	return n, err
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

// release stops the body handed out, closes the file and returns the memory
// to the pool.
func (s *spool) release() {
	if s.out != nil {
		s.out.stop()
		s.out = nil
	}
	if s.file != nil {
		s.file.Close()
		s.file = nil
	}
	putBuffer(&s.mem)
	s.fileSize = 0
}
