package gateway

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"strings"
	"time"

	"github.com/groupexec/groupexec/gateway/config"
)

// maxTokenLen bounds the bearer tokens the gateway will look at.
const maxTokenLen = 8 << 10

// bearerToken returns the token of r's "Authorization: Bearer" header, or
// ok false when r has none. The header is read as a backend reading it
// most leniently would, so that the token the gateway verifies is the one
// the backend acts on: a tab, a no-break space or a next line (isBlank)
// around the scheme is a space (a backend splitting on any whitespace took
// "Bearer\t<token>" for the token, which the gateway served as the default
// tenant); a header without the scheme that a backend reads as a token is
// that token (bareToken); and two Authorization headers
// are refused, since the gateway would verify one and a backend might read
// the other, which no one verified. So is a request with an access_token
// query parameter (see tokenParam).
func bearerToken(r *http.Request) (tok string, ok bool, err error) {
	if r.URL.RawQuery != "" && hasParam(r.URL.RawQuery, tokenParam) {
		return "", false, tokenError("an access_token in the query is not read: send it in Authorization")
	}
	vs := r.Header["Authorization"]
	switch {
	case len(vs) == 0:
		return "", false, nil
	case len(vs) > 1:
		return "", false, tokenError("more than one Authorization header")
	}
	v := trimBlanks(vs[0])
	i := 0
	for i < len(v) && !isBlank(v[i]) {
		i++
	}
	if i == len(v) || !strings.EqualFold(v[:i], "Bearer") {
		if tok := bareToken(v); tok != "" {
			return tok, true, nil
		}
		return "", false, nil
	}
	return trimBlanks(v[i:]), true, nil
}

// bareToken returns the Authorization header value v as hapi-auth-jwt2
// reads it by default, every "Bearer" (in any case) and every space
// removed, when that has the form of a compact JWS, the form
// jsonwebtoken, which verifies it there, accepts; else "". So read,
// "<token>" and "<token> Bearer" are the token, which the gateway, finding
// no scheme of "Bearer", served as the default tenant while the backend
// acted on the token. No other scheme's credentials have that form: Basic's
// have no dot, Digest's and the like quotes and commas, and a JWT under
// another scheme ("JWT <token>", which such a backend does not read
// either) does not start as a JWS header does, with the 'e' of a base64url
// '{'. A value without a dot costs a byte search.
func bareToken(v string) string {
	if strings.IndexByte(v, '.') < 0 {
		return ""
	}
	b := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		switch {
		case v[i] == ' ':
		case len(v)-i >= 6 && strings.EqualFold(v[i:i+6], "Bearer"):
			i += 5
		default:
			b = append(b, v[i])
		}
	}
	tok := string(b)
	h, rest, _ := strings.Cut(tok, ".")
	p, sig, ok := strings.Cut(rest, ".")
	if !ok || h == "" || h[0] != 'e' || p == "" || !base64URL(h) || !base64URL(p) || !base64URL(sig) {
		return ""
	}
	return tok
}

// base64URL reports whether s has only the characters of unpadded
// base64url.
func base64URL(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := lower(s[i]); (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// isBlank reports whether c separates the scheme from the token to some
// backend: a space or a tab, and the bytes a backend decoding headers as
// Latin-1 (WSGI and ASGI servers do) takes for whitespace, the no-break
// space (0xA0) and next line (0x85), on which Python's str.split(), which
// many backends split Authorization with, splits. net/http refuses the
// other control characters in a header.
func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == 0xa0 || c == 0x85 }

// trimBlanks returns s without its leading and trailing blanks (isBlank),
// byte by byte: strings.Trim would read 0xA0 and 0x85 as runes.
func trimBlanks(s string) string {
	for len(s) > 0 && isBlank(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && isBlank(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

// tokenParam is the query parameter RFC 6750 (2.3) lets a client send its
// token in, which many backends read when Authorization has none
// (passport-http-bearer by default, Spring Security and Keycloak when
// allowed), or instead of it: the gateway, which reads Authorization only,
// served such a request as the default tenant (or as the header's), while
// the backend acted on a token the gateway never verified. A tenant over
// its limits moved its requests onto the default tenant's so.
const tokenParam = "access_token"

// tokenError says why a bearer token was refused; it matches
// ErrUnauthenticated.
type tokenError string

func (e tokenError) Error() string        { return "gateway: bearer token: " + string(e) }
func (e tokenError) Is(target error) bool { return target == ErrUnauthenticated }

// verifyToken checks a JWT (RFC 7519, compact JWS) against b and returns
// the tenant claim. The algorithm is the configured key's (HS256, RS256 or
// ES256): a token whose header names another, "none" included, is refused,
// so a token cannot choose how it is checked. exp is required.
func verifyToken(b *config.Bearer, tok string, now time.Time) (string, error) {
	if len(tok) > maxTokenLen {
		return "", tokenError("too long")
	}
	h, rest, ok1 := strings.Cut(tok, ".")
	p, s, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || strings.Contains(s, ".") {
		return "", tokenError("not a compact JWS (header.payload.signature)")
	}
	var hdr struct {
		Alg  string   `json:"alg"`
		Crit []string `json:"crit"`
	}
	if err := decodeSegment(h, &hdr); err != nil {
		return "", tokenError("malformed header")
	}
	sig, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return "", tokenError("malformed signature")
	}
	signed := tok[:len(h)+1+len(p)]
	if want := algOf(b.Key()); hdr.Alg != want {
		return "", tokenError("algorithm " + quote(hdr.Alg) + ", want " + want)
	}
	if len(hdr.Crit) > 0 {
		return "", tokenError("critical header extensions are not supported")
	}
	if !verifySig(b.Key(), signed, sig) {
		return "", tokenError("bad signature")
	}
	var claims map[string]any
	if err := decodeSegment(p, &claims); err != nil {
		return "", tokenError("malformed claims")
	}
	exp, ok := numericDate(claims["exp"])
	if !ok {
		return "", tokenError("no exp")
	}
	if !now.Before(exp.Add(b.Leeway)) {
		return "", tokenError("expired")
	}
	if v, present := claims["nbf"]; present {
		nbf, ok := numericDate(v)
		if !ok || now.Add(b.Leeway).Before(nbf) {
			return "", tokenError("not valid yet")
		}
	}
	if b.Issuer != "" && claims["iss"] != b.Issuer {
		return "", tokenError("wrong issuer")
	}
	if b.Audience != "" && !hasAudience(claims["aud"], b.Audience) {
		return "", tokenError("wrong audience")
	}
	// An empty claim names no tenant, as a missing one does: the token is
	// refused rather than served as the default tenant, which is for
	// requests that carry no token at all.
	tenant, ok := claims[b.Claim].(string)
	if !ok || tenant == "" {
		return "", tokenError("no tenant in claim " + quote(b.Claim))
	}
	return tenant, nil
}

func quote(s string) string { return `"` + s + `"` }

// decodeSegment decodes a base64url JSON segment into v, numbers as
// json.Number.
func decodeSegment(seg string, v any) error {
	data, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return dec.Decode(v)
}

func algOf(key any) string {
	switch key.(type) {
	case []byte:
		return "HS256"
	case *rsa.PublicKey:
		return "RS256"
	case *ecdsa.PublicKey:
		return "ES256"
	}
	return ""
}

func verifySig(key any, signed string, sig []byte) bool {
	sum := sha256.Sum256([]byte(signed))
	switch k := key.(type) {
	case []byte:
		mac := hmac.New(sha256.New, k)
		mac.Write([]byte(signed))
		return hmac.Equal(mac.Sum(nil), sig)
	case *rsa.PublicKey:
		return rsa.VerifyPKCS1v15(k, crypto.SHA256, sum[:], sig) == nil
	case *ecdsa.PublicKey:
		if len(sig) != 64 { // R || S, 32 bytes each (RFC 7518 3.4)
			return false
		}
		r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
		return ecdsa.Verify(k, sum[:], r, s)
	}
	return false
}

// numericDate reads a NumericDate claim (seconds since the epoch).
func numericDate(v any) (time.Time, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return time.Time{}, false
	}
	f, err := n.Float64()
	if err != nil || f < 0 || f > 1<<40 {
		return time.Time{}, false
	}
	sec := int64(f)
	return time.Unix(sec, int64((f-float64(sec))*1e9)), true
}

func hasAudience(v any, want string) bool {
	switch aud := v.(type) {
	case string:
		return aud == want
	case []any:
		for _, a := range aud {
			if a == want {
				return true
			}
		}
	}
	return false
}
