// Package redislimit keeps the executor's global and per-group limits in
// Redis, so that "at most 200 running for tenant X" holds across every
// process that shares the Redis and the key prefix, not per process.
package redislimit
