package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// What net/http's transport writes with the standard logger (here: bytes a
// backend sent after its response, on a connection gone idle) reaches the
// gateway's log as a record of it, not as a plain line on stderr.
func TestStandardLogGoesToTheGatewayLog(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	bin := build(t, dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(r)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					// A response, then bytes nobody asked for.
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokUNASKED")
				}
			}()
		}
	}()
	cfgPath := filepath.Join(dir, "gateway.yaml")
	os.WriteFile(cfgPath, fmt.Appendf(nil, "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nbackends: [http://%s]\n", ln.Addr()), 0o600)
	p := startBinary(t, bin, cfgPath)
	c := &http.Client{Timeout: bound}
	resp, err := c.Get(p.proxy)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	var line string
	for deadline := time.Now().Add(bound); line == ""; time.Sleep(10 * time.Millisecond) {
		for l := range strings.Lines(p.logs()) {
			if strings.Contains(l, "UNASKED") {
				line = l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the transport's line about the unasked bytes never came\n%s", p.logs())
		}
	}
	if !strings.HasPrefix(line, "time=") || !strings.Contains(line, "level=WARN") {
		t.Errorf("the transport's line is not a record of the gateway's log: %q", line)
	}
}
