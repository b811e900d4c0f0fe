package gateway

import (
	"net/http"
	"testing"
)

func TestIsEventStream(t *testing.T) {
	for ct, want := range map[string]bool{
		"text/event-stream": true, "Text/Event-Stream; charset=utf-8": true, "text/event-stream ;x=y": true,
		"": false, "text/event-streamx": false, "text/event": false, "application/json": false,
	} {
		if got := isEventStream(http.Header{"Content-Type": {ct}}); got != want {
			t.Errorf("isEventStream(%q) = %v, want %v", ct, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { isEventStream(http.Header{}) }); n > 1 {
		t.Errorf("%v allocations", n)
	}
}
