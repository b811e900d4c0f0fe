package gateway_test

import (
	"runtime"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/gateway"
	"github.com/groupexec/groupexec/gateway/config"
)

// With tenant.from path, the check of a path's PATH_INFOs (the rest after
// each ".php" segment) costs what the path's length does, whatever the
// number of such segments: read before the rate limit, a path of one
// ".php" segment after another, its prefix's letters in another case
// ("/T.php" for "/t"), had the rest of the path copied for each, and a
// request within max_header_bytes (64 KiB) took a quarter of a second of
// CPU, the square of its length. Ten times the segments allocate about
// ten times the bytes, not a hundred times.
func TestPathInfoCheckLinearInThePath(t *testing.T) {
	cfg := config.Tenant{From: config.FromPath, Header: "X-Tenant", PathPrefix: "/t"}
	allocated := func(segments int) uint64 {
		r := rawRequest(t, "/t/acme"+strings.Repeat("/T.php", segments))
		if got, err := gateway.ExtractTenant(&cfg, r); err != nil || got != "acme" {
			t.Fatalf("%d segments: %q, %v; want acme", segments, got, err)
		}
		const runs = 5
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range runs {
			gateway.ExtractTenant(&cfg, r)
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / runs
	}
	few, many := allocated(100), allocated(1000)
	// 20 times, and 64 KiB for whatever else the process allocates
	// meanwhile: a copy per segment allocates 100 times (3 MB).
	if many > 20*few+64<<10 {
		t.Errorf("a path of 1000 \"/T.php\" segments allocates %d bytes to check, one of 100 %d: more than in proportion to its length", many, few)
	}
}
