package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/groupexec/groupexec/gateway/config"
)

// waitBound is how long a parse may take before it is taken as waiting for
// good; nothing waits for it to pass.
const waitBound = 10 * time.Second

// The files a config names are regular files, read at load and again on
// every reload: a named pipe there is refused at once, naming its key.
// os.ReadFile waited for a writer that never came, so that a reload (and
// the drain behind it) waited for good; a device was read until it ended,
// /dev/zero until the process ran out of memory.
func TestNamedFileThatIsNoRegularFileRefused(t *testing.T) {
	for _, key := range []string{"cert_file", "key_file", "client_ca_file", "hmac_secret_file", "public_key_file"} {
		t.Run(key, func(t *testing.T) {
			dir := t.TempDir()
			f := sampleFiles(t, dir)
			f["public_key_file"] = ""
			pipe := filepath.Join(dir, "pipe")
			if err := syscall.Mkfifo(pipe, 0o600); err != nil {
				t.Fatal(err)
			}
			f[key] = pipe
			yaml := "backends: [http://a:1]\ntls: {cert_file: " + f["cert_file"] + ", key_file: " + f["key_file"] +
				", client_ca_file: " + f["client_ca_file"] + "}\ntenant:\n  from: bearer\n  bearer: {"
			if key == "public_key_file" {
				yaml += "public_key_file: " + pipe + "}\n"
			} else {
				yaml += "hmac_secret_file: " + f["hmac_secret_file"] + "}\n"
			}
			parsed := make(chan error, 1)
			go func() {
				_, err := config.Parse([]byte(yaml))
				parsed <- err
			}()
			var err error
			select {
			case err = <-parsed:
			case <-time.After(waitBound):
				// Let the read go, so that the test ends.
				if w, err := os.OpenFile(pipe, os.O_WRONLY, 0); err == nil {
					w.Close()
				}
				<-parsed
				t.Fatalf("a named pipe as %s: the parse waited for a writer", key)
			}
			if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), key+": "+pipe+" is not a regular file (a named pipe)") {
				t.Errorf("a named pipe as %s: %v; want it refused, naming the key, the path and what it is", key, err)
			}
		})
	}
}

// A device is refused alike, at once, however much it would give.
func TestNamedFileThatIsADeviceRefused(t *testing.T) {
	if _, err := os.Stat(os.DevNull); err != nil {
		t.Skip(err)
	}
	_, err := config.Parse([]byte("backends: [http://a:1]\ntenant:\n  from: bearer\n  bearer: {hmac_secret_file: " + os.DevNull + "}\n"))
	if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "hmac_secret_file: "+os.DevNull+" is not a regular file (a character device)") {
		t.Errorf("%s as the secret: %v; want it refused as no regular file", os.DevNull, err)
	}
}

// A named file larger than config.MaxFileBytes is refused, naming its key,
// without being read whole: the config file itself was capped so, the
// files it names were not. The file is sparse: its bytes cost no disk.
func TestNamedFileTooLargeRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(config.MaxFileBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = config.Parse([]byte("backends: [http://a:1]\ntenant:\n  from: bearer\n  bearer: {hmac_secret_file: " + path + "}\n"))
	if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "hmac_secret_file: "+path+" is larger than 64 MiB") {
		t.Errorf("a secret file of MaxFileBytes+1: %v; want it refused, naming the key and the file", err)
	}
}

// LoadRegular, which a reload reads the config with, refuses a named pipe
// at once; Load reads one (--check --config /dev/stdin) as the file's text.
func TestLoadRegularRefusesANamedPipe(t *testing.T) {
	pipe := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		t.Fatal(err)
	}
	loaded := make(chan error, 1)
	go func() {
		_, err := config.LoadRegular(pipe)
		loaded <- err
	}()
	select {
	case err := <-loaded:
		if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), pipe+" is not a regular file (a named pipe)") {
			t.Errorf("LoadRegular of a named pipe: %v; want it refused, naming the path and what it is", err)
		}
	case <-time.After(waitBound):
		if w, err := os.OpenFile(pipe, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		<-loaded
		t.Fatal("LoadRegular of a named pipe waited for a writer")
	}
	// Load goes on reading a pipe: the writer comes after the open.
	go func() {
		w, err := os.OpenFile(pipe, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		w.WriteString("backends: [http://a:1]\n")
		w.Close()
	}()
	if _, err := config.Load(pipe); err != nil {
		t.Errorf("Load of a named pipe written to: %v", err)
	}
}
