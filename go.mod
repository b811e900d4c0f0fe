module github.com/groupexec/groupexec

go 1.26.0

require (
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
)
