module github.com/groupexec/groupexec/benchmarks

go 1.26.0

require (
	github.com/alitto/pond/v2 v2.7.1
	github.com/eapache/go-resiliency v1.7.0
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/groupexec/groupexec v0.0.0
	github.com/panjf2000/ants/v2 v2.12.1
	github.com/redis/go-redis/v9 v9.23.0
	github.com/sony/gobreaker/v2 v2.4.0
	go.uber.org/goleak v1.3.0
	golang.org/x/sync v0.24.0
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

replace github.com/groupexec/groupexec => ../
