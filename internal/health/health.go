// Package health answers the probes an orchestrator sends a process:
// /livez, whether the process runs (restart it when it does not), and
// /readyz, whether what it needs answers (send it no work while it does
// not). Checks of outside services run in the background (Monitor), so a
// probe is answered at once from the last result and never waits on a
// service that does not answer.
package health

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// Check is one dependency a Monitor probes.
type Check struct {
	// Name says what is checked ("redis", "kafka"); /readyz names it when
	// it fails.
	Name string
	// Probe answers nil when the dependency answers; its error may name
	// addresses and is only logged.
	Probe func(ctx context.Context) error
}

// Monitor probes its checks every Interval, each bounded by Timeout, until
// the context of Run ends. A dependency that stops answering is seen at
// most Interval + Timeout after it stopped, and one that answers again at
// most Interval after.
type Monitor struct {
	Interval time.Duration
	Timeout  time.Duration
	Checks   []Check
	// Logger receives one line when a check starts failing (with the cause)
	// and one when it passes again; nil: slog.Default().
	Logger *slog.Logger

	mu      sync.Mutex
	results map[string]error // absent: not probed yet
	running map[string]bool  // a probe of the check has not returned
}

// Run probes until ctx ends.
func (m *Monitor) Run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.round(ctx)
		t.Reset(m.Interval)
	}
}

// round probes every check at once and keeps their results.
func (m *Monitor) round(ctx context.Context) {
	var wg sync.WaitGroup
	for _, c := range m.Checks {
		wg.Go(func() { m.probe(ctx, c) })
	}
	wg.Wait()
}

// probe runs c's probe and records its result, or a failure once Timeout
// passed: a client that does not give up at its context's deadline (a
// Redis client without context timeouts waits out its read timeout) delays
// neither the answer nor the other checks. Until such a probe returns, no
// other of the same check starts, and the check stays failed.
func (m *Monitor) probe(ctx context.Context, c Check) {
	m.mu.Lock()
	if m.running == nil {
		m.running = map[string]bool{}
	}
	if m.running[c.Name] {
		m.mu.Unlock()
		return
	}
	m.running[c.Name] = true
	m.mu.Unlock()
	pctx, cancel := context.WithTimeout(ctx, m.Timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		err := c.Probe(pctx)
		m.mu.Lock()
		m.running[c.Name] = false
		m.mu.Unlock()
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-pctx.Done():
		err = fmt.Errorf("no answer within %s: %w", m.Timeout, pctx.Err())
	}
	if ctx.Err() != nil {
		return // stopping: the probe was cut short, not the service
	}
	log := m.Logger
	if log == nil {
		log = slog.Default()
	}
	m.mu.Lock()
	if m.results == nil {
		m.results = map[string]error{}
	}
	prev, seen := m.results[c.Name]
	m.results[c.Name] = err
	m.mu.Unlock()
	switch {
	case err != nil && (!seen || prev == nil):
		log.Warn("readiness: a dependency does not answer; /readyz answers 503 until it does", "check", c.Name, "timeout", m.Timeout, "err", err)
	case err == nil && seen && prev != nil:
		log.Info("readiness: a dependency answers again", "check", c.Name)
	}
}

// Err is nil when every check passed its last probe, and otherwise names
// the checks that failed or were not probed yet, without their causes.
func (m *Monitor) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for _, c := range m.Checks {
		err, seen := m.results[c.Name]
		switch {
		case !seen:
			errs = append(errs, fmt.Errorf("%s: not checked yet", c.Name))
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: no answer within %s", c.Name, m.Timeout))
		}
	}
	return errors.Join(errs...)
}

// Live answers GET /livez: 200 "ok" while alive is nil, else 503 with
// "not live: " and its message.
func Live(alive func() error) http.Handler { return answer("live", alive) }

// Ready answers GET /readyz: 200 "ok" while every condition is nil, else
// 503 with "not ready: " and the messages of those that are not, one
// line. The messages are written as they are: a condition must not put an
// address or a secret in its error.
func Ready(conditions ...func() error) http.Handler {
	return answer("ready", func() error {
		var errs []error
		for _, c := range conditions {
			errs = append(errs, c())
		}
		return errors.Join(errs...)
	})
}

func answer(what string, err func() error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if e := err(); e != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "not "+what+": "+strings.ReplaceAll(e.Error(), "\n", "; ")+"\n")
			return
		}
		io.WriteString(w, "ok\n")
	})
}

// Kafka probes the brokers over a connection of its own each time (a
// pooled one, or metadata a client keeps, would hide a broker that stopped
// answering): the first bootstrap broker that answers must name the topic
// with a leader for each of its partitions, so rows can be produced to
// and read from it.
func Kafka(dialer *kafka.Dialer, brokers []string, topic string) func(ctx context.Context) error {
	if dialer == nil {
		dialer = &kafka.Dialer{}
	}
	return func(ctx context.Context) error {
		var errs []error
		for _, b := range brokers {
			err := kafkaTopic(ctx, dialer, b, topic)
			if err == nil {
				return nil
			}
			errs = append(errs, fmt.Errorf("broker %s: %w", b, err))
			if ctx.Err() != nil {
				break
			}
		}
		return errors.Join(errs...)
	}
}

func kafkaTopic(ctx context.Context, dialer *kafka.Dialer, broker, topic string) error {
	conn, err := dialer.DialContext(ctx, "tcp", broker)
	if err != nil {
		return err
	}
	defer conn.Close()
	// The connection's own calls do not take ctx: its deadline stands in.
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	parts, err := conn.ReadPartitions(topic)
	if err != nil {
		return fmt.Errorf("read the partitions of %s: %w", topic, err)
	}
	if len(parts) == 0 {
		return fmt.Errorf("topic %s has no partitions", topic)
	}
	for _, p := range parts {
		if p.Leader.Host == "" || p.Leader.ID < 0 {
			return fmt.Errorf("partition %d of %s has no leader", p.ID, topic)
		}
	}
	return nil
}
