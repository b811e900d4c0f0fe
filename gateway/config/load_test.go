package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/gateway/config"
)

// Load reads at most config.MaxFileBytes of a file, and refuses a larger
// one naming it, as a file it cannot use: it read the whole of whatever
// --config named, so that /dev/zero, or a log given for the config, grew
// the process until the system killed it (on a reload too, holding the
// reload lock). The file here is sparse: its bytes cost no disk.
func TestLoadRefusesAFileTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge.yaml")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("backends: [http://a:1]\n")
	if err := f.Truncate(config.MaxFileBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = config.Load(path)
	if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a file of MaxFileBytes+1: %v; want an invalid config naming the file and its size", err)
	}
}
