package config

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/netip"
)

// prefix is a parsed tenant.trusted_proxies entry.
type prefix = netip.Prefix

// parsePrefix accepts a CIDR or a single address. A CIDR with address
// bits set past its length is refused with a *hostBitsError.
func parsePrefix(s string) (prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		// Trusts unmaps the peer's address: an IPv4-mapped prefix
		// ("::ffff:10.0.0.0/104") is its IPv4 one, or would never match.
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		if p != p.Masked() {
			// Masked, "10.0.0.7/8" would trust the whole /8 without a
			// word: the entry of one proxy, its length mistyped.
			return prefix{}, &hostBitsError{p.Masked()}
		}
		return p, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return prefix{}, err
	}
	if a.Zone() != "" {
		// A prefix has no zone: taken, the entry would trust the
		// address on every interface, not the one it names.
		return prefix{}, errZone
	}
	a = a.Unmap() // as Trusts unmaps the peer's
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// hostBitsError is parsePrefix's refusal of a CIDR with address bits set
// past its length; masked is the prefix it would trust.
type hostBitsError struct{ masked prefix }

func (e *hostBitsError) Error() string {
	return "address bits set past the length of " + e.masked.String()
}

// errZone is parsePrefix's refusal of an address with a zone
// ("fe80::1%eth0").
var errZone = errors.New("an address with a zone")

// Trusts reports whether a connection from addr may name its tenant itself
// (tenant.trusted_proxies; every address when the list is empty).
func (t *Tenant) Trusts(addr netip.Addr) bool {
	if len(t.TrustedProxies) == 0 {
		return true
	}
	// Without its zone: a link-local peer's address carries its
	// interface's ("fe80::7%eth0"), and a prefix never contains a zoned
	// address.
	addr = addr.Unmap().WithZone("")
	for _, p := range t.trusted {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// minHMACSecret is the shortest HS256 secret accepted, in bytes: as long as
// the hash (RFC 7518 3.2).
const minHMACSecret = 32

// checkValues checks the bearer settings that are invalid whatever
// tenant.from is: a value refused only once from is bearer would pass a
// check of the file and fail the reload that turns bearer on.
func (b *Bearer) checkValues(ck *checker) {
	if b.Claim == "" {
		ck.bad("tenant.bearer.claim", "must name a claim")
	}
	nonNegative(ck, "tenant.bearer.leeway", b.Leeway)
}

// check loads the bearer token's verification key.
func (b *Bearer) check(ck *checker) {
	switch {
	case (b.HMACSecretFile == "") == (b.PublicKeyFile == ""):
		ck.bad("tenant.bearer", "set exactly one of hmac_secret_file and public_key_file")
	case b.HMACSecretFile != "":
		data, err := readNamedFile(b.HMACSecretFile)
		if err != nil {
			ck.bad("tenant.bearer.hmac_secret_file", "%v", err)
			return
		}
		secret := bytes.TrimSpace(data)
		if len(secret) < minHMACSecret {
			ck.bad("tenant.bearer.hmac_secret_file", "the secret has %d bytes, fewer than %d", len(secret), minHMACSecret)
			return
		}
		b.key = secret
	default:
		data, err := readNamedFile(b.PublicKeyFile)
		if err != nil {
			ck.bad("tenant.bearer.public_key_file", "%v", err)
			return
		}
		key, err := publicKey(data)
		if err != nil {
			ck.bad("tenant.bearer.public_key_file", "%v", err)
			return
		}
		b.key = key
	}
}

type keyError string

func (e keyError) Error() string { return string(e) }

func publicKey(data []byte) (any, error) {
	blk, _ := pem.Decode(data)
	if blk == nil || blk.Type != "PUBLIC KEY" {
		return nil, keyError(`no PEM "PUBLIC KEY" block`)
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, err
	}
	switch k := k.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return nil, keyError("an RSA key must have at least 2048 bits")
		}
		return k, nil
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return nil, keyError("an ECDSA key must be on P-256 (ES256)")
		}
		return k, nil
	}
	return nil, keyError("the key is neither RSA nor ECDSA P-256")
}

// Key returns the verification key loaded by Parse: a []byte HMAC secret
// (HS256), an *rsa.PublicKey (RS256) or an *ecdsa.PublicKey (ES256); nil
// unless tenant.from is bearer.
func (b *Bearer) Key() any { return b.key }

// tlsFiles is what TLS's files hold.
type tlsFiles struct {
	cert tls.Certificate
	cas  *x509.CertPool
}

func (c *Config) checkTLS(ck *checker) {
	t := c.TLS
	c.tls = nil
	if t.CertFile == "" && t.KeyFile == "" {
		if t.ClientCAFile != "" {
			ck.bad("tls.client_ca_file", "needs tls.cert_file and tls.key_file")
		}
		return
	}
	if t.CertFile == "" || t.KeyFile == "" {
		ck.bad("tls", "cert_file and key_file go together")
		return
	}
	// Read as tls.LoadX509KeyPair reads them, but each a regular file
	// and capped (readNamedFile).
	certPEM, err := readNamedFile(t.CertFile)
	if err != nil {
		ck.bad("tls.cert_file", "%v", err)
		return
	}
	keyPEM, err := readNamedFile(t.KeyFile)
	if err != nil {
		ck.bad("tls.key_file", "%v", err)
		return
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		ck.bad("tls.cert_file", "%v", err)
		return
	}
	f := &tlsFiles{cert: cert}
	if t.ClientCAFile != "" {
		data, err := readNamedFile(t.ClientCAFile)
		if err != nil {
			ck.bad("tls.client_ca_file", "%v", err)
			return
		}
		f.cas = x509.NewCertPool()
		if !f.cas.AppendCertsFromPEM(data) {
			ck.bad("tls.client_ca_file", "no PEM certificate in %s", t.ClientCAFile)
			return
		}
	}
	c.tls = f
}

// ServerTLS returns the proxy listener's TLS configuration, or nil when the
// config has no tls section. With tls.client_ca_file, clients must present
// a certificate it verifies.
func (c *Config) ServerTLS() *tls.Config {
	if c.tls == nil {
		return nil
	}
	tc := &tls.Config{Certificates: []tls.Certificate{c.tls.cert}, MinVersion: tls.VersionTLS12}
	if c.tls.cas != nil {
		tc.ClientCAs = c.tls.cas
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc
}
