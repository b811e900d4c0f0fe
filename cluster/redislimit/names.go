package redislimit

import (
	"crypto/sha256"
	"encoding/hex"
)

// maxKeyName is the longest executor key that names its Redis keys as it
// is. A group key may come from a client (a tenant header): each of a
// key's ten Redis keys carries its name, in Redis and in the holder, for
// twice the TTL after its last use, so a key of a megabyte cost over ten
// megabytes until then. A longer key is named by its first maxKeyName
// bytes, kept readable for an operator, and the SHA-256 of the whole key.
// Every key at or under the bound keeps the name it always had.
const maxKeyName = 200

// keyName returns the name of key in its Redis keys: key itself, or, over
// maxKeyName bytes, its first maxKeyName bytes, '#' and the hex SHA-256 of
// key. A hashed name is longer than maxKeyName, so that no key named as it
// is names the same Redis keys as a longer one.
func keyName(key string) string {
	if len(key) <= maxKeyName {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return key[:maxKeyName] + "#" + hex.EncodeToString(sum[:])
}
