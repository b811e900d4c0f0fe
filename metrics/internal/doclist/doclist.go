// Package doclist reads the list of metrics a package doc shows its users,
// so that the packages' tests check that list against what they export.
package doclist

import (
	"os"
	"regexp"
	"slices"
	"strings"
)

// line matches a line of a package doc's metric list: a tab, a name, its
// labels (or attributes) in braces, then two spaces or more and the
// description.
var line = regexp.MustCompile(`^//\t([a-z_]+)(?:\{([^}]*)\})?\s{2,}\S`)

// Read returns the names listed in the doc comment of the Go file at path,
// each with its label names, sorted (a label's value after "=" dropped).
func Read(path string) (map[string][]string, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	listed := map[string][]string{}
	for l := range strings.SplitSeq(string(src), "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		var labels []string
		if m[2] != "" {
			for label := range strings.SplitSeq(m[2], ",") {
				name, _, _ := strings.Cut(label, "=")
				labels = append(labels, name)
			}
		}
		slices.Sort(labels)
		listed[m[1]] = labels
	}
	return listed, nil
}
