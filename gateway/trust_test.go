package gateway_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/gateway"
)

// tenantEcho is a backend that answers with the tenant header it was sent.
func tenantEcho(t *testing.T) string {
	return backend(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Header.Get("X-Tenant"))
	}).URL
}

// A client that is not a trusted proxy cannot name its tenant: whatever key
// it sends, it is served as the default tenant, so rotating keys escapes
// nothing, and the backend is told the tenant the gateway used.
func TestUntrustedPeerCannotNameTenant(t *testing.T) {
	gw := start(t, tenantEcho(t), minimal+"tenant: {trusted_proxies: [10.0.0.0/8]}\nlimits: {max_in_flight_per_group: 64}\n")
	c := client(t)
	for i := range 10 {
		resp, body := do(t, c, http.MethodGet, gw.url, fmt.Sprintf("rotating-%d", i), nil)
		if resp.StatusCode != 200 || body != "anonymous" {
			t.Fatalf("request %d: %d, backend saw tenant %q", i, resp.StatusCode, body)
		}
	}
	if got := metric(t, gw.gw.Metrics(), requestsTotal, "tenant", "anonymous"); got != 10 {
		t.Errorf("%v requests counted for the default tenant, want 10", got)
	}
}

func TestTrustedPeerNamesTenant(t *testing.T) {
	gw := start(t, tenantEcho(t), minimal+"tenant: {trusted_proxies: [127.0.0.0/8, \"::1\"]}\n")
	if resp, body := do(t, client(t), http.MethodGet, gw.url, "acme", nil); resp.StatusCode != 200 || body != "acme" {
		t.Errorf("%d, backend saw tenant %q", resp.StatusCode, body)
	}
}

// pki is a throwaway CA with a server certificate for 127.0.0.1, written to
// files for the config.
type pki struct {
	ca       *x509.Certificate
	caKey    *ecdsa.PrivateKey
	dir      string
	caFile   string
	certFile string
	keyFile  string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir()}
	p.caKey, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &p.caKey.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	p.ca, _ = x509.ParseCertificate(der)
	p.caFile = p.write(t, "ca.pem", "CERTIFICATE", der)
	cert := p.issue(t, "127.0.0.1", x509.ExtKeyUsageServerAuth)
	p.certFile = p.write(t, "cert.pem", "CERTIFICATE", cert.Certificate[0])
	kder, _ := x509.MarshalECPrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
	p.keyFile = p.write(t, "key.pem", "EC PRIVATE KEY", kder)
	return p
}

func (p *pki) write(t *testing.T, name, typ string, der []byte) string {
	f := filepath.Join(p.dir, name)
	if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// issue returns a certificate signed by the CA for cn (also its IP SAN
// when cn is an address).
func (p *pki) issue(t *testing.T, cn string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	if ip := net.ParseIP(cn); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// With tenant.from: client_cert, the tenant is the verified client
// certificate's common name; a client without one does not get through the
// handshake.
func TestClientCertTenant(t *testing.T) {
	p := newPKI(t)
	gw := start(t, tenantEcho(t), minimal+fmt.Sprintf("tls: {cert_file: %s, key_file: %s, client_ca_file: %s}\ntenant: {from: client_cert}\n",
		p.certFile, p.keyFile, p.caFile))
	url := strings.Replace(gw.url, "http://", "https://", 1)
	roots := x509.NewCertPool()
	roots.AddCert(p.ca)
	tlsClient := func(certs ...tls.Certificate) *http.Client {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs}, DisableKeepAlives: true}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: bound}
	}
	c := tlsClient(p.issue(t, "acme", x509.ExtKeyUsageClientAuth))
	resp, body := do(t, c, http.MethodGet, url, "spoofed", nil)
	if resp.StatusCode != 200 || body != "acme" {
		t.Errorf("%d, backend saw tenant %q; want the certificate's acme", resp.StatusCode, body)
	}
	if _, err := tlsClient().Get(url); err == nil {
		t.Error("a client without a certificate got through")
	}
	// A certificate the CA signed without a common name names no tenant:
	// it is refused as a missing identity is, not served as the default
	// tenant.
	resp, body = do(t, tlsClient(p.issue(t, "", x509.ExtKeyUsageClientAuth)), http.MethodGet, url, "spoofed", nil)
	if code, reason, _ := refusal(t, body); resp.StatusCode != 401 || code != "unauthenticated" || strings.Contains(reason, "bearer") {
		t.Errorf("a certificate without a common name: %d %q, want 401 unauthenticated", resp.StatusCode, body)
	}
	// The credential is the certificate: a Bearer challenge would ask for
	// a scheme the gateway does not take here.
	if ch := resp.Header.Values("WWW-Authenticate"); len(ch) != 0 {
		t.Errorf("a certificate without a common name: challenged with %q, want no challenge", ch)
	}
}

// With tenant.from: client_cert, the headers a backend may read for the
// client's certificate (X-Forwarded-Client-Cert, X-SSL-Client-Cert, ...
// in any spelling) are not proxied: the client's would name a certificate
// the gateway never verified, another tenant's.
func TestClientCertHeadersDropped(t *testing.T) {
	p := newPKI(t)
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Header.Get("X-Tenant")+" "+clientHeaders(r))
	})
	gw := start(t, be.URL, minimal+fmt.Sprintf("tls: {cert_file: %s, key_file: %s, client_ca_file: %s}\ntenant: {from: client_cert}\n",
		p.certFile, p.keyFile, p.caFile))
	roots := x509.NewCertPool()
	roots.AddCert(p.ca)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{p.issue(t, "acme", x509.ExtKeyUsageClientAuth)}},
		DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	const victim = "Subject=\"CN=victim\""
	resp, body := do(t, &http.Client{Transport: tr, Timeout: bound}, http.MethodGet, strings.Replace(gw.url, "http://", "https://", 1), "", nil,
		"X-Forwarded-Client-Cert", victim, "X-Forwarded-Tls-Client-Cert", victim, "X-Forwarded-Tls-Client-Cert-Info", victim,
		"X-SSL-Client-Cert", victim, "X-SSL-Client-DN", "CN=victim", "X-SSL-Client-S-DN", "CN=victim", "X-SSL-Client-Verify", "SUCCESS",
		"SSL-Client-Cert", victim, "ssl_client_cert", victim, "SSL-Client-Verify", "SUCCESS", "X-Client-Cert", victim,
		"X-ARR-ClientCert", victim, "X-Amzn-Mtls-Clientcert", victim, "X-SSL-Client-CN", "victim",
		"X-SSL-Client-SHA1", "00", "X-SSL-Issuer", "CN=ca", "X-Other", "kept")
	if want := "acme X-Other"; resp.StatusCode != 200 || body != want {
		t.Errorf("%d, the backend got %q; want %q", resp.StatusCode, body, want)
	}
}

// With tenant.from: bearer, the tenant is a claim of a verified token: a
// forged, expired or algorithm-swapped token is refused with 401, as is a
// valid one whose claim is missing or empty; no token is the default tenant.
func TestBearerTenant(t *testing.T) {
	secret, file := hmacSecretFile(t)
	now := time.Unix(1_700_000_000, 0)
	clk := clock.NewFake(now)
	gw := start(t, tenantEcho(t), minimal+"tenant:\n  from: bearer\n  bearer: {hmac_secret_file: "+file+", claim: tenant, audience: gw}\n",
		gateway.WithClock(clk))
	sign := func(alg string, key []byte, claims map[string]any) string {
		h, _ := json.Marshal(map[string]string{"alg": alg, "typ": "JWT"})
		p, _ := json.Marshal(claims)
		s := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(p)
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(s))
		if alg == "none" {
			return s + "."
		}
		return s + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
	}
	valid := map[string]any{"tenant": "acme", "exp": now.Add(time.Minute).Unix(), "aud": []string{"gw"}}
	c := client(t)
	call := func(tok string) (int, string) {
		hdr := []string{}
		if tok != "" {
			hdr = []string{"Authorization", "Bearer " + tok}
		}
		resp, body := do(t, c, http.MethodGet, gw.url, "spoofed", nil, hdr...)
		return resp.StatusCode, body
	}
	if code, body := call(sign("HS256", secret, valid)); code != 200 || body != "acme" {
		t.Errorf("valid token: %d, backend saw tenant %q", code, body)
	}
	if code, body := call(""); code != 200 || body != "anonymous" {
		t.Errorf("no token: %d, backend saw tenant %q", code, body)
	}
	expired := map[string]any{"tenant": "acme", "exp": now.Add(-time.Second).Unix(), "aud": "gw"}
	for name, tok := range map[string]string{
		"forged":         sign("HS256", []byte(strings.Repeat("x", 32)), valid),
		"expired":        sign("HS256", secret, expired),
		"alg none":       sign("none", nil, valid),
		"alg HS384":      sign("HS384", secret, valid),
		"wrong audience": sign("HS256", secret, map[string]any{"tenant": "acme", "exp": now.Add(time.Minute).Unix(), "aud": "other"}),
		"no exp":         sign("HS256", secret, map[string]any{"tenant": "acme", "aud": "gw"}),
		"no tenant":      sign("HS256", secret, map[string]any{"exp": now.Add(time.Minute).Unix(), "aud": "gw"}),
		"empty tenant":   sign("HS256", secret, map[string]any{"tenant": "", "exp": now.Add(time.Minute).Unix(), "aud": "gw"}),
		"garbage":        "a.b",
	} {
		resp, body := do(t, c, http.MethodGet, gw.url, "", nil, "Authorization", "Bearer "+tok)
		if code, _, _ := refusal(t, body); resp.StatusCode != 401 || code != "unauthenticated" ||
			!strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s token: %d %q", name, resp.StatusCode, body)
		}
	}
	clk.Advance(2 * time.Minute) // the valid token expires
	if code, _ := call(sign("HS256", secret, valid)); code != 401 {
		t.Errorf("token after its exp: %d", code)
	}
}

// With tenant.from: bearer, the token the gateway verifies is the one a
// backend reads: "Bearer", a tab, then the token is that token's tenant
// (not the default tenant, while a backend splitting on whitespace acts
// on the token), and two Authorization headers, of which a backend may
// read the one the gateway did not verify, are refused 401.
func TestBearerTokenReadAsBackendsRead(t *testing.T) {
	secret, file := hmacSecretFile(t)
	now := time.Unix(1_700_000_000, 0)
	gw := start(t, tenantEcho(t), minimal+"tenant:\n  from: bearer\n  bearer: {hmac_secret_file: "+file+", claim: tenant}\n",
		gateway.WithClock(clock.NewFake(now)))
	sign := func(key []byte, tenant string) string {
		return hs256(key, map[string]any{"tenant": tenant, "exp": now.Add(time.Minute).Unix()})
	}
	acme, forged := sign(secret, "acme"), sign([]byte(strings.Repeat("x", 32)), "victim")
	c := client(t)
	for _, tc := range []struct {
		name  string
		auth  []string
		code  int
		reads string // the tenant the backend is told
	}{
		{"tab", []string{"Bearer\t" + acme}, 200, "acme"},
		{"tab and spaces", []string{"bearer \t " + acme}, 200, "acme"},
		{"valid then forged", []string{"Bearer " + acme, "Bearer " + forged}, 401, ""},
		{"valid twice", []string{"Bearer " + acme, "Bearer " + acme}, 401, ""},
		{"basic then valid", []string{"Basic YTpi", "Bearer " + acme}, 401, ""},
	} {
		req, _ := http.NewRequest(http.MethodGet, gw.url, nil)
		for _, a := range tc.auth {
			req.Header.Add("Authorization", a)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || tc.code == 200 && string(body) != tc.reads {
			t.Errorf("%s: %d, the backend was told %q; want %d %s", tc.name, resp.StatusCode, body, tc.code, tc.reads)
		}
	}
}

// With tenant.from: bearer, the headers a backend may read for the user an
// authenticating proxy vouches for (X-Forwarded-User, X-Auth-Request-Email,
// Remote-User, ... in any spelling) are not proxied: the client's would
// name a user the gateway never verified, of another tenant than the
// token's.
func TestUserHeadersDropped(t *testing.T) {
	secret, file := hmacSecretFile(t)
	now := time.Unix(1_700_000_000, 0)
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Header.Get("X-Tenant")+" "+clientHeaders(r))
	})
	gw := start(t, be.URL, minimal+"tenant:\n  from: bearer\n  bearer: {hmac_secret_file: "+file+", claim: tenant}\n",
		gateway.WithClock(clock.NewFake(now)))
	tok := hs256(secret, map[string]any{"tenant": "acme", "exp": now.Add(time.Minute).Unix()})
	hdr := []string{"Authorization", "Bearer " + tok, "X-Other", "kept", "X_Forwarded_User", "victim", "remote_user", "victim"}
	for _, h := range []string{
		"X-Forwarded-User", "X-Forwarded-Email", "X-Forwarded-Preferred-Username", "X-Forwarded-Groups", "X-Forwarded-Access-Token",
		"X-Auth-Request-User", "X-Auth-Request-Email", "X-Auth-Request-Preferred-Username", "X-Auth-Request-Groups",
		"X-Auth-Request-Access-Token", "Remote-User", "X-Remote-User", "X-WEBAUTH-USER", "X-Userinfo", "X-Amzn-Oidc-Data",
		"X-Amzn-Oidc-Identity", "X-Amzn-Oidc-Accesstoken", "X-Goog-Authenticated-User-Email", "X-Goog-Authenticated-User-Id",
		"X-Goog-IAP-JWT-Assertion", "X-MS-CLIENT-PRINCIPAL", "X-MS-CLIENT-PRINCIPAL-NAME", "X-MS-CLIENT-PRINCIPAL-ID",
		"Remote-Groups", "Remote-Email", "Remote-Name", "X-Remote-Group", "X-authentik-username", "X-authentik-groups",
		"X-authentik-entitlements", "X-authentik-email", "X-authentik-name", "X-authentik-uid",
	} {
		hdr = append(hdr, h, "victim")
	}
	if resp, body := do(t, client(t), http.MethodGet, gw.url, "", nil, hdr...); resp.StatusCode != 200 || body != "acme X-Other" {
		t.Errorf("%d, the backend got %q; want %q", resp.StatusCode, body, "acme X-Other")
	}
}

// A client cannot keep the backend from being told its tenant by naming
// the tenant header in Connection, which makes it a hop-by-hop header the
// proxy would drop from the proxied request.
func TestTenantHeaderNotDroppedByConnection(t *testing.T) {
	gw := start(t, tenantEcho(t), minimal+"tenant: {trusted_proxies: [10.0.0.0/8]}\n")
	c := client(t)
	for _, conn := range []string{"X-Tenant", "keep-alive, x-tenant", "x-tenant,close"} {
		resp, body := do(t, c, http.MethodGet, gw.url, "acme", nil, "Connection", conn)
		if resp.StatusCode != 200 || body != "anonymous" {
			t.Errorf("Connection: %s: %d, the backend was told tenant %q, want the default tenant", conn, resp.StatusCode, body)
		}
	}
}

// A client cannot name its tenant, or its address, to a backend that reads
// headers as CGI variables (HTTP_X_TENANT) by spelling the header the
// gateway sets with underscores: such headers are not proxied, other
// headers with underscores are.
func TestTenantHeaderAliasesDropped(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		var names []string
		for k := range r.Header {
			if strings.Contains(k, "_") {
				names = append(names, k)
			}
		}
		sort.Strings(names)
		io.WriteString(w, r.Header.Get("X-Tenant")+" "+strings.Join(names, ","))
	})
	gw := start(t, be.URL, minimal+"tenant: {trusted_proxies: [10.0.0.0/8]}\n")
	c := client(t)
	resp, body := do(t, c, http.MethodGet, gw.url, "", nil, "X_Tenant", "victim",
		"X_Forwarded_For", "10.1.2.3", "X-Forwarded_Host", "victim.example", "X_Other", "kept")
	if resp.StatusCode != 200 || body != "anonymous X_other" {
		t.Errorf("%d, the backend got %q; want tenant anonymous and only X_other", resp.StatusCode, body)
	}
}

// With tenant.from: path, the headers a backend may route by instead of
// the path (X-Original-URL, X-Rewrite-URL, ... in any spelling) are not
// proxied: the backend would serve another tenant's path than the one the
// gateway admitted the request under. With another tenant source the path
// names no tenant, and they are proxied as sent.
func TestPathOverrideHeadersDropped(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Header.Get("X-Tenant")+" "+clientHeaders(r))
	})
	hdr := []string{
		"X-Original-URL", "/t/victim/x", "X-Rewrite-URL", "/t/victim/x", "X-Override-URL", "/t/victim/x",
		"X-Original-URI", "/t/victim/x", "X_Original_URL", "/t/victim/x", "x-forwarded-prefix", "/t/victim",
		"X-Forwarded-Path", "/t/victim/x", "X-Forwarded-Uri", "/t/victim/x", "X-Other", "kept",
	}
	gw := start(t, be.URL, minimal+"tenant: {from: path, path_prefix: /t, default: anon}\n")
	c := client(t)
	for _, p := range []string{"/x", "/t/acme/x"} {
		want := "anon X-Other"
		if p != "/x" {
			want = "acme X-Other"
		}
		if resp, body := do(t, c, http.MethodGet, gw.url+p, "", nil, hdr...); resp.StatusCode != 200 || body != want {
			t.Errorf("from: path, %s: %d, the backend got %q; want %q", p, resp.StatusCode, body, want)
		}
	}
	gw = start(t, be.URL, minimal)
	const all = "acme X-Forwarded-Path,X-Forwarded-Prefix,X-Forwarded-Uri,X-Original-Uri,X-Original-Url,X-Other,X-Override-Url,X-Rewrite-Url,X_original_url"
	if resp, body := do(t, c, http.MethodGet, gw.url+"/x", "acme", nil, hdr...); resp.StatusCode != 200 || body != all {
		t.Errorf("from: header: %d, the backend got %q; want %q", resp.StatusCode, body, all)
	}
}

// The headers a backend may read for the client's scheme, port or address
// instead of X-Forwarded-Proto and X-Forwarded-For (X-Forwarded-Ssl,
// X-Scheme, True-Client-IP, Client-IP, ...), in any spelling, are not
// proxied: the
// gateway tells those, whatever the client claims, from a trusted proxy or
// not.
func TestForwardingHeadersDropped(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s %s", r.Header.Get("X-Forwarded-Proto"), r.Header.Get("X-Forwarded-For"), clientHeaders(r))
	})
	hdr := []string{
		"X-Forwarded-Ssl", "on", "X-Forwarded-Scheme", "https", "X-Forwarded-Protocol", "ssl", "X-Forwarded-Port", "443",
		"Front-End-Https", "on", "X_Forwarded_Ssl", "on", "Client-IP", "10.9.9.9", "X-Client-IP", "10.9.9.9",
		"True-Client-IP", "10.9.9.9", "X-Cluster-Client-IP", "10.9.9.9", "CF-Connecting-IP", "10.9.9.9",
		"Fastly-Client-IP", "10.9.9.9", "X-Forwarded", "for=10.9.9.9", "Forwarded-For", "10.9.9.9",
		"True_Client_IP", "10.9.9.9", "X-Scheme", "https", "X-Forwarded-HTTPS", "on", "X-Other", "kept",
	}
	for _, trust := range []string{"[10.0.0.0/8]", "[127.0.0.0/8]"} {
		gw := start(t, be.URL, minimal+"tenant: {trusted_proxies: "+trust+"}\n")
		const want = "http 127.0.0.1 X-Other"
		if resp, body := do(t, client(t), http.MethodGet, gw.url, "acme", nil, hdr...); resp.StatusCode != 200 || body != want {
			t.Errorf("trusted_proxies %s: %d, the backend got %q; want %q", trust, resp.StatusCode, body, want)
		}
	}
}

// A client's Proxy header is not proxied, whatever the tenant source or
// trust: a CGI backend reads it as HTTP_PROXY, which the HTTP
// client libraries under it take for the outbound proxy to use (httpoxy,
// CVE-2016-5385), and would send its own requests, credentials and all,
// through the client's proxy.
func TestProxyHeaderDropped(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, clientHeaders(r))
	})
	for _, trust := range []string{"[10.0.0.0/8]", "[127.0.0.0/8]"} {
		gw := start(t, be.URL, minimal+"tenant: {trusted_proxies: "+trust+"}\n")
		resp, body := do(t, client(t), http.MethodGet, gw.url, "acme", nil, "Proxy", "http://10.9.9.9:3128", "X-Other", "kept")
		if resp.StatusCode != 200 || body != "X-Other" {
			t.Errorf("trusted_proxies %s: %d, the backend got %q; want X-Other", trust, resp.StatusCode, body)
		}
	}
}

// The headers a backend may route virtual hosts by instead of Host or
// X-Forwarded-Host (X-Forwarded-Server, X-Original-Host, X-Host, ... in
// any spelling) are not proxied, whatever the tenant source: with
// tenant.from host the backend would serve another tenant's host under
// the limits of the tenant the gateway admitted the request as, and in
// every mode they would contradict the X-Forwarded-Host the gateway sets.
func TestHostHeadersDropped(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %q %s", r.Header.Get("X-Tenant"), r.Header.Values("X-Forwarded-Host"), clientHeaders(r))
	})
	hdr := []string{
		"X-Forwarded-Server", "victim.example", "X-Original-Host", "victim.example", "X-Host", "victim.example",
		"X-HTTP-Host-Override", "victim.example", "X_Original_Host", "victim.example", "x-forwarded-host", "victim.example",
		"X-Other", "kept",
	}
	for _, tc := range []struct{ tenant, want string }{
		{"{from: host}", `127.0.0.1 ["127.0.0.1:%s"] X-Other`},
		{"{}", `acme ["127.0.0.1:%s"] X-Other`},
	} {
		gw := start(t, be.URL, minimal+"tenant: "+tc.tenant+"\n")
		want := fmt.Sprintf(tc.want, gw.url[strings.LastIndexByte(gw.url, ':')+1:])
		if resp, body := do(t, client(t), http.MethodGet, gw.url, "acme", nil, hdr...); resp.StatusCode != 200 || body != want {
			t.Errorf("tenant %s: %d, the backend got %q; want %q", tc.tenant, resp.StatusCode, body, want)
		}
	}
}

// A tenant header configured with an underscore is the same CGI variable
// as its spellings with hyphens: the client's X-Tenant, beside the
// X_tenant the gateway sets, is not proxied.
func TestUnderscoredTenantHeaderAliasesDropped(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Join(r.Header.Values("X_tenant"), ",")+" "+strings.Join(r.Header.Values("X-Tenant"), ","))
	})
	gw := start(t, be.URL, minimal+"tenant: {header: X_Tenant, trusted_proxies: [10.0.0.0/8]}\n")
	c := client(t)
	resp, body := do(t, c, http.MethodGet, gw.url, "", nil, "X-Tenant", "victim")
	if resp.StatusCode != 200 || body != "anonymous " {
		t.Errorf("%d, the backend got %q; want X_tenant anonymous and no X-Tenant", resp.StatusCode, body)
	}
}

// X-Real-IP, which nginx's realip module and many frameworks trust, names
// the connection's peer, as X-Forwarded-For does, whatever the client sent
// (in its own name, with underscores, or named in Connection to drop it),
// from a trusted proxy or not.
func TestRealIPIsThePeer(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		var names []string
		for k := range r.Header {
			if strings.Contains(k, "_") {
				names = append(names, k)
			}
		}
		fmt.Fprintf(w, "%q %q %q", r.Header.Values("X-Real-Ip"), r.Header.Values("X-Forwarded-For"), names)
	})
	const want = `["127.0.0.1"] ["127.0.0.1"] []`
	for _, trust := range []string{"[10.0.0.0/8]", "[127.0.0.0/8]"} {
		gw := start(t, be.URL, minimal+"tenant: {trusted_proxies: "+trust+"}\n")
		c := client(t)
		for _, hdr := range [][]string{
			{"X-Real-IP", "10.9.9.9", "X-Forwarded-For", "10.9.9.9"},
			{"X_Real_IP", "10.9.9.9"},
			{"X-Real-IP", "10.9.9.9", "Connection", "X-Real-IP"},
			{},
		} {
			if resp, body := do(t, c, http.MethodGet, gw.url, "", nil, hdr...); resp.StatusCode != 200 || body != want {
				t.Errorf("trusted_proxies %s, %q: %d, the backend got %s; want %s", trust, hdr, resp.StatusCode, body, want)
			}
		}
	}
}

// clientHeaders returns the sorted names of r's headers that the client
// sent and the gateway proxied: all but those the gateway sets (the tenant
// header, X-Forwarded-For, -Host and -Proto, X-Real-IP) and those Go's
// client adds or the test sends as its credentials.
func clientHeaders(r *http.Request) string {
	var names []string
	for k := range r.Header {
		switch k {
		case "Accept-Encoding", "Authorization", "User-Agent", "X-Tenant", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip":
			continue
		}
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

// Header families a front proxy sets, each member of which a backend or a
// proxy before it may read, are not proxied, in any spelling: X-Envoy-*
// whatever the tenant source (Envoy takes them from its downstream: the
// client's X-Envoy-Max-Retries would have it send one admitted request
// many times), and with tenant.from bearer X-Remote-Extra-* (Kubernetes'
// user extras), X-Authentik-*, X-Auth-Request-*, ... of another user than
// the token's. A name that is only the family's prefix without its hyphen
// is proxied, and so is a member of a bearer family with another source.
func TestHeaderFamiliesDropped(t *testing.T) {
	secret, file := hmacSecretFile(t)
	now := time.Unix(1_700_000_000, 0)
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Header.Get("X-Tenant")+" "+clientHeaders(r))
	})
	tok := hs256(secret, map[string]any{"tenant": "acme", "exp": now.Add(time.Minute).Unix()})
	hdr := []string{
		"Authorization", "Bearer " + tok, "X-Other", "kept", "X-Envoy", "kept", "X-Remote-Extra", "kept",
		"X-Envoy-Max-Retries", "100", "x-envoy-retry-on", "5xx", "X_Envoy_Original_Path", "/victim",
		"X-Envoy-Upstream-Rq-Timeout-Ms", "0",
	}
	bearerOnly := []string{
		"X-Remote-Extra-Scopes", "victim", "x_remote_extra_tenant", "victim", "X-Authentik-Meta-App", "victim",
		"X-Auth-Request-Tenant", "victim", "X-Amzn-Oidc-Foo", "victim", "X-Goog-Authenticated-User-Tenant", "victim",
		"X-MS-CLIENT-PRINCIPAL-IDP", "victim",
	}
	gw := start(t, be.URL, minimal+"tenant:\n  from: bearer\n  bearer: {hmac_secret_file: "+file+", claim: tenant}\n",
		gateway.WithClock(clock.NewFake(now)))
	const want = "acme X-Envoy,X-Other,X-Remote-Extra"
	if resp, body := do(t, client(t), http.MethodGet, gw.url, "", nil, append(hdr, bearerOnly...)...); resp.StatusCode != 200 || body != want {
		t.Errorf("from: bearer: %d, the backend got %q; want %q", resp.StatusCode, body, want)
	}
	gw = start(t, be.URL, minimal)
	const wantHeader = "acme X-Amzn-Oidc-Foo,X-Auth-Request-Tenant,X-Authentik-Meta-App,X-Envoy,X-Goog-Authenticated-User-Tenant," +
		"X-Ms-Client-Principal-Idp,X-Other,X-Remote-Extra,X-Remote-Extra-Scopes,X_remote_extra_tenant"
	if resp, body := do(t, client(t), http.MethodGet, gw.url, "acme", nil, append(hdr, bearerOnly...)...); resp.StatusCode != 200 || body != wantHeader {
		t.Errorf("from: header: %d, the backend got %q; want %q", resp.StatusCode, body, wantHeader)
	}
}

// With tenant.from: bearer, a request with an access_token query
// parameter (RFC 6750 section 2.3), its name read as PHP reads it, is
// refused 401, with a token in Authorization or without: a backend that
// reads the parameter acted on a token the gateway never verified, for a
// request it served as the default tenant (or as the header token's).
func TestBearerTokenInQueryRefused(t *testing.T) {
	secret, file := hmacSecretFile(t)
	now := time.Unix(1_700_000_000, 0)
	gw := start(t, tenantEcho(t), minimal+"tenant:\n  from: bearer\n  bearer: {hmac_secret_file: "+file+", claim: tenant}\n",
		gateway.WithClock(clock.NewFake(now)))
	tok := hs256(secret, map[string]any{"tenant": "acme", "exp": now.Add(time.Minute).Unix()})
	c := client(t)
	for _, tc := range []struct {
		query, auth string
		code        int
		tenant      string
	}{
		{"?access_token=" + tok, "", 401, ""},
		{"?a=1&access_token=" + tok, "Bearer " + tok, 401, ""},
		{"?access.token=x", "", 401, ""},
		{"?%61ccess_token=x", "", 401, ""},
		{"?token=x&access_tokens=y", "Bearer " + tok, 200, "acme"},
		{"?token=x", "", 200, "anonymous"},
	} {
		var hdr []string
		if tc.auth != "" {
			hdr = []string{"Authorization", tc.auth}
		}
		resp, body := do(t, c, http.MethodGet, gw.url+"/x"+tc.query, "", nil, hdr...)
		switch {
		case resp.StatusCode != tc.code:
			t.Errorf("%s, Authorization %t: %d %q, want %d", tc.query, tc.auth != "", resp.StatusCode, body, tc.code)
		case tc.code == 401:
			if code, _, _ := refusal(t, body); code != "unauthenticated" {
				t.Errorf("%s: 401 %q, want unauthenticated", tc.query, body)
			}
		case body != tc.tenant:
			t.Errorf("%s: the backend was told %q, want %q", tc.query, body, tc.tenant)
		}
	}
}
