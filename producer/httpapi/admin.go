package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/bulkreg/bulkreg/internal/health"
)

// AdminHandler serves what operators scrape and probe, on a listener of its
// own (BULKREG_ADMIN_ADDR) that sellers never reach:
//   - /metrics;
//   - /livez: 200 "ok" while the process serves (a liveness probe);
//   - /readyz: 200 "ok" while every ready condition is nil, else 503 "not
//     ready: " and their messages, which name what is not ready and never
//     an address (a readiness probe; serve passes its checks of Redis and
//     Kafka, health.Monitor);
//   - /healthz: 200 "ok", or 503 "unavailable" while health fails (serve's
//     pings Redis at each request); the cause is logged, never shown.
func AdminHandler(g prometheus.Gatherer, healthz func(ctx context.Context) error, log *slog.Logger, ready ...func() error) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.Handle("GET /livez", health.Live(func() error { return nil }))
	mux.Handle("GET /readyz", health.Ready(ready...))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if healthz != nil {
			if err := healthz(r.Context()); err != nil {
				// The cause names addresses and dial errors: for the log only.
				log.Warn("health check failed", "err", err)
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, "unavailable\n")
				return
			}
		}
		io.WriteString(w, "ok\n")
	})
	return mux
}
