package gateway_test

import (
	"runtime"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/gateway"
	"github.com/groupexec/groupexec/gateway/config"
)

// The query's parameters are read as PHP reads their names (a dot or a
// blank an underscore) at a cost of a few bytes each, not of a replacer
// made afresh for each name: read for every request before its rate
// limit (_url with tenant.from path, _method for every request,
// access_token with bearer), a query of one "a.=" after another within
// max_header_bytes made each request take several times the CPU of
// proxying it.
func TestQueryNamesReadCheaply(t *testing.T) {
	cfg := config.Tenant{From: config.FromPath, Header: "X-Tenant", PathPrefix: "/t"}
	const params = 1000
	q := strings.Repeat("a.=&", params)
	r := rawRequest(t, "/t/acme?"+q)
	if got, err := gateway.ExtractTenant(&cfg, r); err != nil || got != "acme" {
		t.Fatalf("%q, %v; want acme", got, err)
	}
	const runs = 5
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		gateway.ExtractTenant(&cfg, r)
	}
	runtime.ReadMemStats(&after)
	// A name read so is one small string; a replacer is a table of 256
	// bytes and more.
	if perParam := (after.TotalAlloc - before.TotalAlloc) / runs / params; perParam > 64 {
		t.Errorf("each query parameter allocates %d bytes to read its name, want at most 64", perParam)
	}
}
