package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

func main() {
	p, err := policy.New(
		policy.WithGlobalMaxInFlight(256),      // at most 256 permits running, all tenants together
		policy.WithDefaultMaxInFlight(64),      // a tenant may have 64 admitted (waiting + running)
		policy.WithDefaultMaxConcurrency(4),    // of which 4 running
		policy.WithQueueTimeout(2*time.Second), // a task that cannot start within 2s never runs
	)
	if err != nil {
		log.Fatal(err) // names the invalid option and value
	}
	ex, err := executor.New(p)
	if err != nil {
		log.Fatal(err)
	}
	defer ex.Close()

	http.HandleFunc("/report", func(w http.ResponseWriter, r *http.Request) {
		tenant := r.Header.Get("X-Tenant")
		if tenant == "" {
			tenant = "anonymous"
		}
		err := ex.Do(r.Context(), tenant, func(ctx context.Context) error {
			return report(ctx, w, tenant)
		})
		var rej *executor.RejectedError
		switch {
		case errors.As(err, &rej):
			// Refused at once: shed the request instead of queueing it.
			// Tell the client only which limit refused it; rej.Error()
			// (group, use and maximum) is for your logs.
			http.Error(w, "refused by the "+string(rej.Limit)+" limit", http.StatusTooManyRequests)
		case err != nil:
			log.Print(err)
			http.Error(w, "internal error", http.StatusInternalServerError)
		}
	})
	if err := http.ListenAndServe("127.0.0.1:8080", nil); err != nil {
		log.Print(err)
	}
}

func report(ctx context.Context, w http.ResponseWriter, tenant string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "report for %s\n", tenant)
	return err
}
