package health

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/bulkreg/bulkreg/internal/config"
)

// Settings are how often a Monitor probes and how long one probe waits,
// as --readiness-interval and --readiness-timeout set them.
type Settings struct {
	Interval time.Duration
	Timeout  time.Duration
}

// DefaultSettings see a service that stops answering within 5 s (an
// interval and a timeout), inside a readiness probe's period and failure
// threshold, and cost one short connection per check every 2 s.
func DefaultSettings() Settings {
	return Settings{Interval: 2 * time.Second, Timeout: 3 * time.Second}
}

// Bind registers the two flags; checked names what the checks reach
// ("Kafka", "Redis and Kafka").
func (s *Settings) Bind(b *config.Binder, checked string) {
	b.Duration(&s.Interval, "readiness-interval", "how often /readyz's checks of "+checked+" run; one that stops answering turns /readyz 503 within this plus --readiness-timeout")
	b.Duration(&s.Timeout, "readiness-timeout", "how long one readiness check waits for an answer before /readyz says that service does not answer")
}

// Validate names each setting that is not positive.
func (s Settings) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"readiness-interval", s.Interval}, {"readiness-timeout", s.Timeout}} {
		if f.d <= 0 {
			errs = append(errs, fmt.Errorf("--%s (%s) must be greater than 0, got %s", f.name, config.EnvName(f.name), f.d))
		}
	}
	return errors.Join(errs...)
}

// Monitor is a Monitor of checks with these settings.
func (s Settings) Monitor(log *slog.Logger, checks ...Check) *Monitor {
	return &Monitor{Interval: s.Interval, Timeout: s.Timeout, Checks: checks, Logger: log}
}
