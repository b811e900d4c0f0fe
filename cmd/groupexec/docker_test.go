package main

import (
	"os"
	"strings"
	"testing"
)

// The image's last stage is FROM scratch, which has no /tmp: the system's
// temporary directory, where body.spool_dir's default spools every body
// over body.buffer_bytes. Without one the container refuses each such
// body 500 spool_failed; the image must bring a /tmp its user can write.
func TestImageHasTempDir(t *testing.T) {
	data, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	last := 0
	for i, l := range lines {
		if strings.HasPrefix(l, "FROM ") {
			last = i
		}
	}
	if !strings.HasPrefix(lines[last], "FROM scratch") {
		t.Skipf("the last stage is %q, not scratch", lines[last])
	}
	var user, tmpOwner string
	for _, l := range lines[last:] {
		f := strings.Fields(l)
		switch {
		case len(f) == 2 && f[0] == "USER":
			user = f[1]
		case len(f) >= 3 && f[0] == "COPY" && f[len(f)-1] == "/tmp":
			tmpOwner = "root"
			for _, a := range f[1 : len(f)-2] {
				if o, ok := strings.CutPrefix(a, "--chown="); ok {
					tmpOwner = o
				}
			}
		}
	}
	switch {
	case tmpOwner == "":
		t.Error("the image's scratch stage has no /tmp (body.spool_dir's default): bodies over body.buffer_bytes would fail")
	case tmpOwner != user:
		t.Errorf("/tmp is owned by %s, the gateway runs as %s: it could not spool there", tmpOwner, user)
	}
}
