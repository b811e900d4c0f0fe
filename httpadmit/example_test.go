package httpadmit_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/policy"
)

// Each tenant (the X-Tenant header) may have one request in the service: a
// second one while the first runs is refused with 429, and other tenants are
// served meanwhile.
func ExampleHandler() {
	p, _ := policy.New(policy.WithMaxInFlightPerGroup(1))
	ex, _ := executor.New(p)
	defer ex.Close()

	entered, release := make(chan struct{}), make(chan struct{})
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			entered <- struct{}{}
			<-release
		}
		fmt.Fprintf(w, "hello %s\n", r.Header.Get("X-Tenant"))
	})
	srv := httptest.NewServer(httpadmit.Handler(ex, api))
	defer srv.Close()

	done := make(chan string)
	go func() { done <- fetch(srv.URL+"/slow", "acme") }()
	<-entered // acme's one slot is taken
	fmt.Print(fetch(srv.URL, "acme"))
	fmt.Print(fetch(srv.URL, "globex"))
	close(release)
	fmt.Print(<-done)
	// Output:
	// acme: 429 (Retry-After 1) refused by the group in-flight limit
	// globex: 200 hello globex
	// acme: 200 hello acme
}

func fetch(url, tenant string) string {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("X-Tenant", tenant)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error() + "\n"
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		return fmt.Sprintf("%s: %d (Retry-After %s) %s", tenant, resp.StatusCode, ra, body)
	}
	return fmt.Sprintf("%s: %d %s", tenant, resp.StatusCode, body)
}

// A client with one slot per destination host: a response holds its host's
// slot until its body is closed.
func ExampleTransport() {
	p, _ := policy.New(policy.WithMaxInFlightPerGroup(1))
	ex, _ := executor.New(p)
	defer ex.Close()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "data")
	}))
	defer backend.Close()
	client := &http.Client{Transport: httpadmit.Transport(ex, nil)}

	first, err := client.Get(backend.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = client.Get(backend.URL)
	fmt.Println("while the first body is open:", errors.Is(err, executor.ErrRejected))
	first.Body.Close()
	resp, err := client.Get(backend.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println("once it is closed:", string(body))
	// Output:
	// while the first body is open: true
	// once it is closed: data
}
