package gateway_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"

	"github.com/groupexec/groupexec/gateway"
	"github.com/groupexec/groupexec/gateway/config"
)

func ExampleGateway_Serve() {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello, %s", r.Header.Get("X-Tenant"))
	}))
	defer be.Close()

	cfg, err := config.Parse([]byte("listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nbackends: [" + be.URL + "]\n"))
	if err != nil {
		panic(err)
	}
	proxyLn, adminLn, err := gateway.Listen(cfg)
	if err != nil {
		panic(err)
	}
	gw, err := gateway.New(cfg, gateway.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error)
	go func() { served <- gw.Serve(ctx, proxyLn, adminLn) }()

	req, _ := http.NewRequest(http.MethodGet, "http://"+proxyLn.Addr().String()+"/", nil)
	req.Header.Set("X-Tenant", "acme")
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))

	stop() // drains, then Serve returns
	fmt.Println("drained:", <-served)
	// Output:
	// 200 hello, acme
	// drained: <nil>
}
