package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// AdminHandler serves what operators scrape and probe, on a listener of its
// own (BULKREG_ADMIN_ADDR) that sellers never reach: /metrics, and /healthz
// (200 "ok", or 503 "unavailable" while health fails; the cause is logged,
// never shown).
func AdminHandler(g prometheus.Gatherer, health func(ctx context.Context) error, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if health != nil {
			if err := health(r.Context()); err != nil {
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
