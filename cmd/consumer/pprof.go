package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// servePprof serves the runtime's profiles (/debug/pprof/: heap, CPU
// profile, execution trace, goroutines) on a listener of their own, only
// when --pprof-addr names one. They are not on the metrics listener, which
// deployments open to Prometheus and probes (BULKREG_METRICS_ADDR=:9464):
// a heap profile shows what the process holds, rows and sellers included,
// and a CPU profile or a trace costs CPU for as long as anyone asks, so
// whoever can scrape a consumer must not get them. Where a row's CPU goes is
// still what sizes a consumer: an operator turns this on for a while, on
// loopback (kubectl port-forward) or behind their own access control.
// An empty addr serves nothing; stop closes the listener.
func servePprof(addr string, log *slog.Logger) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for /debug/pprof on %s (--pprof-addr): %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	// No WriteTimeout: a CPU profile or a trace answers after the seconds
	// it was asked to record.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Warn("profiles served: /debug/pprof answers anyone who reaches this address", "pprof", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}
