package config_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/groupexec/groupexec/gateway/config"
)

// The sample config loads as it is, and with its commented-out sections
// turned on (given files for them); between them it sets every key the
// config has.
func TestExampleConfig(t *testing.T) {
	if _, err := config.Load("example.yaml"); err != nil {
		t.Fatalf("example.yaml: %v", err)
	}
	data, err := os.ReadFile("example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := sampleFiles(t, dir)
	// Uncomment "# key:" lines whose key is one of the config's (not prose),
	// and point the file keys at files that exist.
	names := map[string]bool{}
	for _, key := range configKeys(reflect.TypeOf(config.Config{}), "") {
		names[key[strings.LastIndexByte(key, '.')+1:]] = true
	}
	on := regexp.MustCompile(`(?m)^(\s*)# ( *([a-z_]+):.*)$`).ReplaceAllStringFunc(string(data), func(line string) string {
		m := regexp.MustCompile(`^(\s*)# ( *([a-z_]+):.*)$`).FindStringSubmatch(line)
		if !names[m[3]] {
			return line
		}
		return m[1] + m[2]
	})
	on = regexp.MustCompile(`(?m)^(\s*[a-z_]+_file): \S+`).ReplaceAllStringFunc(on, func(s string) string {
		key := strings.TrimSpace(strings.Split(s, ":")[0])
		return strings.Split(s, ":")[0] + ": " + files[key]
	})
	// Exactly one of the bearer's key files.
	on = regexp.MustCompile(`(?m)^\s*public_key_file: .*\n`).ReplaceAllString(on, "")
	for _, from := range []string{"bearer", "client_cert"} {
		text := strings.Replace(on, "from: header", "from: "+from, 1)
		if _, err := config.Parse([]byte(text)); err != nil {
			t.Fatalf("example.yaml with its sections on, tenant.from %s: %v\n%s", from, err, text)
		}
	}
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(on), &root); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{"tenant.bearer.public_key_file": true} // removed above: one key file at a time
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		switch n.Kind {
		case yaml.DocumentNode:
			walk(n.Content[0], prefix)
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				key := prefix + n.Content[i].Value
				if prefix == "tenants." {
					key = "tenants.*"
				}
				have[key] = true
				walk(n.Content[i+1], key+".")
			}
		}
	}
	walk(&root, "")
	for _, key := range configKeys(reflect.TypeOf(config.Config{}), "") {
		if !have[key] {
			t.Errorf("example.yaml does not set %s", key)
		}
	}
}

// configKeys lists the dotted paths of every key of t's yaml tags; map
// values are under "*".
func configKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if !f.IsExported() || tag == "" || tag == "-" {
			continue
		}
		key := prefix + tag
		keys = append(keys, key)
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Map:
			keys = append(keys, configKeys(ft.Elem(), key+".*.")...)
		case ft.Kind() == reflect.Struct && ft != reflect.TypeOf(time.Duration(0)):
			keys = append(keys, configKeys(ft, key+".")...)
		}
	}
	return keys
}

// sampleFiles writes the files the sample's commented sections name: a
// certificate, its key, a CA and an HMAC secret.
func sampleFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sample"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, data, 0o600)
		return p
	}
	cert := write("cert.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return map[string]string{
		"cert_file":        cert,
		"key_file":         write("key.pem", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})),
		"client_ca_file":   cert,
		"hmac_secret_file": write("secret", []byte(strings.Repeat("s", 32))),
	}
}

// example.yaml marks "(restart)" the keys a reload cannot change, and
// "(restart with per: tenant)" those it cannot change while breakers are
// kept per tenant: each key a reload changes alone is refused by
// RestartOnly exactly when example.yaml says so.
func TestExampleRestartMarks(t *testing.T) {
	data, err := os.ReadFile("example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	comments := exampleComments(string(data))
	spool := t.TempDir()
	// Each key, with another valid value than its default; {per} is the
	// breakers' placement of both configs, {other} the other one.
	for _, tc := range []struct{ key, yaml string }{
		{"listen", "listen: 127.0.0.1:8081"}, {"admin", "admin: 127.0.0.1:9091"},
		{"backends", "backends: [http://b:1]"}, {"max_conns", "max_conns: 5"},
		{"max_conns_per_client", "max_conns_per_client: 5"}, {"http2_max_streams", "http2_max_streams: 5"},
		{"max_header_bytes", "max_header_bytes: 4096"},
		{"tenant.from", "tenant: {from: path}"}, {"tenant.header", "tenant: {header: X-T}"},
		{"tenant.path_prefix", "tenant: {path_prefix: /t/}"}, {"tenant.trusted_proxies", "tenant: {trusted_proxies: [10.0.0.0/8]}"},
		{"tenant.default", "tenant: {default: guest}"}, {"tenant.require", "tenant: {require: true}"},
		{"tenant.max_groups", "tenant: {max_groups: 5}"},
		{"limits.global_max_in_flight", "limits: {global_max_in_flight: 5}"},
		{"limits.max_in_flight_per_group", "limits: {max_in_flight_per_group: 5}"},
		{"limits.max_concurrency_per_group", "limits: {max_concurrency_per_group: 5}"},
		{"limits.queue_threshold_per_group", "limits: {queue_threshold_per_group: 5}"},
		{"limits.global_queue_threshold", "limits: {global_queue_threshold: 5}"},
		{"limits.queue_timeout", "limits: {queue_timeout: 1s}"},
		{"rate_limit", "rate_limit: {rps: 5}"}, {"tenants", "tenants: {vip: {share: 2}}"},
		{"breaker.enabled", "breaker: {per: {per}, enabled: false}"}, {"breaker.per", "breaker: {per: {other}}"},
		{"breaker.consecutive_failures", "breaker: {per: {per}, consecutive_failures: 7}"},
		{"breaker.timeout", "breaker: {per: {per}, timeout: 7s}"},
		{"breaker.max_timeout", "breaker: {per: {per}, max_timeout: 70s}"},
		{"breaker.max_requests", "breaker: {per: {per}, max_requests: 2}"},
		{"timeouts.read_header", "timeouts: {read_header: 7s}"}, {"timeouts.read", "timeouts: {read: 7s}"},
		{"timeouts.write", "timeouts: {write: 7s}"}, {"timeouts.idle", "timeouts: {idle: 7s}"},
		{"timeouts.upstream", "timeouts: {upstream: 7s}"},
		{"body.max_bytes", "body: {max_bytes: 5}"}, {"body.max_decoded_bytes", "body: {max_decoded_bytes: 5}"},
		{"body.max_ratio", "body: {max_ratio: 5}"}, {"body.buffer_bytes", "body: {buffer_bytes: 5}"},
		{"body.spool_dir", "body: {spool_dir: " + spool + "}"},
		{"body.spool_max_bytes", "body: {spool_max_bytes: 5}"},
		{"body.spool_max_bytes_per_client", "body: {spool_max_bytes_per_client: 5}"},
		{"response.buffer_bytes", "response: {buffer_bytes: 5}"},
		{"drain_delay", "drain_delay: 1s"}, {"drain_timeout", "drain_timeout: 1s"},
		{"metrics.namespace", "metrics: {namespace: x}"},
	} {
		comment, ok := comments[tc.key]
		if !ok {
			t.Errorf("example.yaml has no line for %s", tc.key)
			continue
		}
		for _, per := range []string{config.PerBackend, config.PerTenant} {
			if tc.key == "breaker.max_timeout" && per == config.PerTenant {
				continue // refused with per: tenant (TestMaxTimeoutRefusedWithTenantBreakers)
			}
			other := map[string]string{config.PerBackend: config.PerTenant, config.PerTenant: config.PerBackend}[per]
			parse := func(yaml string) *config.Config {
				t.Helper()
				if !strings.HasPrefix(yaml, "breaker:") {
					yaml += "\nbreaker: {per: {per}}"
				}
				if !strings.HasPrefix(yaml, "backends:") {
					yaml += "\nbackends: [http://a:1]"
				}
				yaml = strings.NewReplacer("{per}", per, "{other}", other).Replace(yaml)
				c, err := config.Parse([]byte(yaml + "\n"))
				if err != nil {
					t.Fatalf("%s: %v", tc.key, err)
				}
				return c
			}
			refused := len(parse(tc.yaml).RestartOnly(parse("breaker: {per: {per}}"))) > 0
			marked := strings.Contains(comment, "(restart)") ||
				per == config.PerTenant && strings.Contains(comment, "(restart with per: tenant)")
			if refused != marked {
				t.Errorf("breaker.per %s: a reload changing %s is refused: %v; example.yaml's comment marks it so: %v (%q)",
					per, tc.key, refused, marked, comment)
			}
		}
	}
}

// exampleComments returns the comment of each key of example.yaml, by
// dotted path: the text after its # and the comment lines that carry it
// on, indented to the comment column.
func exampleComments(text string) map[string]string {
	keyRe := regexp.MustCompile(`^( *)([a-z0-9_]+):[^#]*(#.*)?$`)
	more := regexp.MustCompile(`^ {20,}(#.*)$`)
	comments := map[string]string{}
	var path []string // the keys enclosing the line, by depth
	var indent []int  // their indentation
	last := ""        // the key whose comment a continuation line carries on
	for line := range strings.SplitSeq(text, "\n") {
		if m := more.FindStringSubmatch(line); m != nil && last != "" {
			comments[last] += " " + m[1]
			continue
		}
		m := keyRe.FindStringSubmatch(line)
		if m == nil {
			last = ""
			continue
		}
		for len(indent) > 0 && indent[len(indent)-1] >= len(m[1]) {
			path, indent = path[:len(path)-1], indent[:len(indent)-1]
		}
		path, indent = append(path, m[2]), append(indent, len(m[1]))
		last = strings.Join(path, ".")
		comments[last] = m[3]
	}
	return comments
}
