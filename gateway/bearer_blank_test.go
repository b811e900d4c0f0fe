package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/gateway"
)

// With tenant.from: bearer, a byte that a backend decoding headers as
// Latin-1 (WSGI, ASGI) takes for whitespace, a no-break space (0xA0) or a
// next line (0x85), separates "Bearer" from the token as a space does: a
// backend splitting the header with Python's str.split() acts on that
// token, which the gateway, reading no token, served as the default
// tenant. A forged token so sent is refused 401.
func TestBearerTokenAfterLatin1Blank(t *testing.T) {
	checkBearerReads(t, func(acme, forged string) []bearerCase {
		return []bearerCase{
			{"no-break space", "Bearer\xa0" + acme, 200, "acme"},
			{"next line", "Bearer\x85" + acme, 200, "acme"},
			{"leading no-break space", "\xa0Bearer " + acme, 200, "acme"},
			{"trailing no-break space", "Bearer " + acme + "\xa0", 200, "acme"},
			{"forged after a no-break space", "Bearer\xa0" + forged, 401, ""},
			{"another scheme", "Basic\xa0YTpi", 200, "anonymous"},
		}
	})
}

// With tenant.from: bearer, an Authorization header that is a token
// without the scheme, or one a backend reads as hapi-auth-jwt2 does by
// default (every "Bearer", in any case, and every space removed:
// "<token>", "<token> Bearer"), is that token's tenant, or refused 401 when
// the token is: the backend acted on the token, for a request the gateway
// served as the default tenant. A header of another scheme, which no
// such reading makes a token of, is served as before.
func TestBearerTokenWithoutScheme(t *testing.T) {
	checkBearerReads(t, func(acme, forged string) []bearerCase {
		return []bearerCase{
			{"bare token", acme, 200, "acme"},
			{"token then scheme", acme + " Bearer", 200, "acme"},
			{"scheme glued on", "BEARER" + acme, 200, "acme"},
			{"bare forged token", forged, 401, ""},
			{"basic", "Basic YTpi", 200, "anonymous"},
			{"digest", `Digest username="a.b", realm="c.d", nonce="e"`, 200, "anonymous"},
			{"opaque key", "k3y", 200, "anonymous"},
			{"another scheme's JWT", "JWT " + acme, 200, "anonymous"},
			{"dotted key", ".a.b", 200, "anonymous"},
		}
	})
}

// bearerCase is an Authorization header, and the status and tenant the
// backend is told that it must get (for a 200).
type bearerCase struct {
	name, auth string
	code       int
	reads      string
}

// checkBearerReads runs a gateway with tenant.from: bearer (HS256) and a
// backend that echoes its tenant, and sends each case made with acme's
// token and a forged one (signed with another key, for tenant victim).
func checkBearerReads(t *testing.T, cases func(acme, forged string) []bearerCase) {
	t.Helper()
	secret, file := hmacSecretFile(t)
	now := time.Unix(1_700_000_000, 0)
	gw := start(t, tenantEcho(t), minimal+"tenant:\n  from: bearer\n  bearer: {hmac_secret_file: "+file+", claim: tenant}\n",
		gateway.WithClock(clock.NewFake(now)))
	sign := func(key []byte, tenant string) string {
		return hs256(key, map[string]any{"tenant": tenant, "exp": now.Add(time.Minute).Unix()})
	}
	c := client(t)
	for _, tc := range cases(sign(secret, "acme"), sign([]byte(strings.Repeat("x", 32)), "victim")) {
		req, _ := http.NewRequest(http.MethodGet, gw.url, nil)
		req.Header.Set("Authorization", tc.auth)
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
