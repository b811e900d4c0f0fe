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
	p, _ := policy.New(policy.WithDefaultMaxInFlight(1))
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
	p, _ := policy.New(policy.WithDefaultMaxInFlight(1))
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

// An export weighs 4 and a lookup 1, so a tenant, with 4 permits, runs one
// export or four lookups at once; a weight no limit can hold is 413.
func ExampleWithWeightFunc() {
	p, _ := policy.New(policy.WithDefaultMaxConcurrency(4), policy.WithDefaultMaxInFlight(4))
	ex, _ := executor.New(p)
	defer ex.Close()

	weights := map[string]int{"/export": 4, "/lookup": 1, "/everything": 16}
	h := httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "done")
	}), httpadmit.WithWeightFunc(func(r *http.Request) (int, error) {
		w, ok := weights[r.URL.Path]
		if !ok {
			return 0, fmt.Errorf("no weight for %s", r.URL.Path)
		}
		return w, nil
	}))
	for _, path := range []string{"/export", "/lookup", "/everything", "/other"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		fmt.Printf("%s: %d %s", path, w.Code, w.Body)
	}
	// Output:
	// /export: 200 done
	// /lookup: 200 done
	// /everything: 413 the weight 16 exceeds the group in-flight limit (4)
	// /other: 400 httpadmit: invalid weight: no weight for /other
}

// A handler that answers 503 because the Transport it calls through refused
// marks the answer refused: the inbound request counts as Cancelled, not as
// a failure, though WithFailureStatus counts 5xx as failures.
func ExampleMarkRefused() {
	p, _ := policy.New(policy.WithDefaultMaxInFlight(1))
	inbound, _ := executor.New(p)
	defer inbound.Close()
	outbound, _ := executor.New(p)
	defer outbound.Close()

	entered, release := make(chan struct{}), make(chan struct{})
	dep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	}))
	defer dep.Close()
	client := &http.Client{Transport: httpadmit.Transport(outbound, nil)}
	go func() { // takes the dependency's one slot
		if resp, err := client.Get(dep.URL); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered

	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := client.Get(dep.URL)
		if err != nil {
			if errors.Is(err, executor.ErrRejected) {
				httpadmit.MarkRefused(w)
			}
			http.Error(w, "the dependency is busy", http.StatusServiceUnavailable)
			return
		}
		resp.Body.Close()
	})
	srv := httptest.NewServer(httpadmit.Handler(inbound, api,
		httpadmit.WithFailureStatus(func(code int) bool { return code >= 500 })))
	defer srv.Close()

	fmt.Print(fetch(srv.URL, "acme"))
	close(release)
	s, _ := inbound.GroupStats("acme")
	fmt.Printf("failed %d, cancelled %d\n", s.Failed, s.Cancelled)
	// Output:
	// acme: 503 the dependency is busy
	// failed 0, cancelled 1
}
