package config_test

import (
	"testing"

	"github.com/groupexec/groupexec/gateway/config"
)

// A file of two YAML documents is refused with the first document's own
// problems too, in line order, as every problem of a file is reported at
// once: the second document alone was reported, and the first's problems
// came one run later, once it was removed.
func TestSecondDocumentReportedWithTheFirstsProblems(t *testing.T) {
	_, err := config.Parse([]byte("backends: [http://a:1]\nlisten: x\n---\nlisten: 127.0.0.1:1\n"))
	want := "config: line 2: listen: \"x\" is not host:port\nconfig: line 3: more than one YAML document"
	if err == nil || err.Error() != want {
		t.Errorf("got %v; want\n%s", err, want)
	}
	// A valid first document is refused for the second alone.
	_, err = config.Parse([]byte("backends: [http://a:1]\n---\nlisten: x\n"))
	if want := "config: line 2: more than one YAML document"; err == nil || err.Error() != want {
		t.Errorf("got %v; want %s", err, want)
	}
}
