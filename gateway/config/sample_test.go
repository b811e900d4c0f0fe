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
