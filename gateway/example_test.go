package gateway_test

import (
	"context"
	"encoding/json"
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

func ExampleNew() {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "report for %s", r.Header.Get("X-Tenant"))
	}))
	defer be.Close()

	cfg, err := config.Parse([]byte(`
backends: [` + be.URL + `]
tenant: {header: X-Tenant, require: true}
limits: {max_concurrency_per_group: 4, queue_timeout: 2s}
`))
	if err != nil {
		panic(err) // every problem of the config, in line order
	}
	gw, err := gateway.New(cfg, gateway.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		panic(err)
	}
	defer gw.Close()

	// A Gateway is the proxy's http.Handler: Serve runs it with the admin
	// endpoints, drain and reload; here a test server runs it alone.
	srv := httptest.NewServer(gw)
	defer srv.Close()
	for _, tenant := range []string{"acme", ""} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/report", nil)
		if tenant != "" {
			req.Header.Set("X-Tenant", tenant)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var refusal struct{ Error string } // a refusal's JSON body names its cause
		if json.Unmarshal(body, &refusal) == nil {
			body = []byte(refusal.Error)
		}
		fmt.Println(resp.StatusCode, string(body))
	}
	// Output:
	// 200 report for acme
	// 400 missing_tenant
}
