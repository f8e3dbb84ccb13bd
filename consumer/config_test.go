package consumer

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/throttle"
)

// TestValidateTimeouts: the drain must end while the group still counts the
// member in, and the refusal names the flags to change.
func TestValidateTimeouts(t *testing.T) {
	base := DefaultConfig()
	base.Brokers = []string{"localhost:9092"}
	for _, tc := range []struct {
		name    string
		change  func(c *Config)
		wantErr []string // every string must be in the error; none: valid
	}{
		{name: "defaults", change: func(c *Config) {}},
		{name: "the default drain is the longest the session allows", change: func(c *Config) {
			if c.DrainTimeout != MaxDrainTimeout(c.SessionTimeout, c.HeartbeatInterval) || c.DrainTimeout != 8*time.Second {
				t.Errorf("default drain %v, want 8s = session − 2 × heartbeat", c.DrainTimeout)
			}
		}},
		{name: "0 derives the drain from a shorter session", change: func(c *Config) { c.SessionTimeout, c.DrainTimeout = 3*time.Second, 0 }},
		{name: "a drain one heartbeat too long", change: func(c *Config) { c.DrainTimeout = 9 * time.Second },
			wantErr: []string{"--drain-timeout (9s)", "--heartbeat-interval (1s)", "--session-timeout (10s)", "at most 8s"}},
		{name: "the reproduction: 4 s drain, 1 s session", change: func(c *Config) {
			c.SessionTimeout, c.HeartbeatInterval, c.DrainTimeout = time.Second, 200*time.Millisecond, 4*time.Second
		}, wantErr: []string{"--drain-timeout (4s)", "--session-timeout (1s)"}},
		{name: "a session with no room to drain", change: func(c *Config) { c.SessionTimeout, c.HeartbeatInterval = time.Second, 600*time.Millisecond },
			wantErr: []string{"--session-timeout (1s) must be longer than two --heartbeat-interval (600ms)"}},
		{name: "a rebalance shorter than the drain", change: func(c *Config) { c.RebalanceTimeout = 5 * time.Second },
			wantErr: []string{"--rebalance-timeout (5s) must be longer than --drain-timeout (8s)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.change(&c)
			err := c.Validate()
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate accepted %+v, want an error naming %q", c, tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

// TestZeroMeansTheDefault: a Config with only its brokers set is the
// production configuration, with the fields that depend on the throttle
// derived from its policy, so no command derives them again.
func TestZeroMeansTheDefault(t *testing.T) {
	brokers := []string{"localhost:9092"}
	got := Config{Brokers: brokers}.WithDefaults(throttle.PerMinute(100))
	want := DefaultConfig()
	want.Brokers = brokers
	if !reflect.DeepEqual(got, want) {
		t.Errorf("zero Config with the production throttle = %+v\nwant DefaultConfig %+v", got, want)
	}
	shrunk := throttle.Policy{Limit: 30, Window: 2 * time.Second, Margin: 60 * time.Millisecond}
	got = Config{Brokers: brokers, SessionTimeout: 3 * time.Second}.WithDefaults(shrunk)
	if got.SellerConcurrency != 30 || got.MaxLateness != 30*time.Millisecond || got.HeartbeatInterval != time.Second ||
		got.DrainTimeout != time.Second {
		t.Errorf("zero fields with limit 30, margin 60 ms, session 3 s = seller concurrency %d, lateness %v, heartbeat %v, drain %v; want 30, 30ms, 1s, 1s",
			got.SellerConcurrency, got.MaxLateness, got.HeartbeatInterval, got.DrainTimeout)
	}
	// A held seller is probed at most half a window and margin apart, so
	// the page's failing notice (held a window and margin after the last
	// failure) does not go out between two probes; never below the first.
	if got.SellerProbeMin != time.Second || got.SellerProbeMax != 1030*time.Millisecond {
		t.Errorf("seller probes with a 2.06 s window and margin = %v to %v; want 1s to 1.03s", got.SellerProbeMin, got.SellerProbeMax)
	}
	if got := (Config{Brokers: brokers}.WithDefaults(throttle.Policy{Limit: 10, Window: time.Second, Margin: 100 * time.Millisecond})); got.SellerProbeMax != time.Second {
		t.Errorf("longest seller probe interval with a 1.1 s window and margin = %v, want 1s (the first probe's wait)", got.SellerProbeMax)
	}
	if got := (Config{Brokers: brokers}.WithDefaults(throttle.Policy{Limit: 10, Window: 10 * time.Second, Margin: time.Second})); got.SellerProbeMax != 5500*time.Millisecond {
		t.Errorf("longest seller probe interval with a 11 s window and margin = %v, want 5.5s", got.SellerProbeMax)
	}
	set := Config{Brokers: brokers, SellerConcurrency: 7, MaxLateness: 5 * time.Millisecond, KeepWarm: -1, SellerProbeMax: 4 * time.Second}.WithDefaults(shrunk)
	if set.SellerConcurrency != 7 || set.MaxLateness != 5*time.Millisecond || set.KeepWarm != -1 || set.SellerProbeMax != 4*time.Second {
		t.Errorf("fields set = %d, %v, %v, %v; want them kept", set.SellerConcurrency, set.MaxLateness, set.KeepWarm, set.SellerProbeMax)
	}
	p := Config{Brokers: brokers}.ThrottlePolicy(100, time.Minute, 250*time.Millisecond)
	if p.MaxWait != 10*time.Second || p.LossHold != time.Minute+500*time.Millisecond {
		t.Errorf("throttle policy of the defaults: max wait %v, hold %v; want the session timeout (10s) and W + 2 × margin (1m0.5s)", p.MaxWait, p.LossHold)
	}
	p = Config{Brokers: brokers, MaxLateness: time.Second}.ThrottlePolicy(100, time.Minute, 250*time.Millisecond)
	if p.LossHold != time.Minute+250*time.Millisecond+2*time.Second {
		t.Errorf("hold with a 1 s lateness = %v, want W′ + 2 × lateness", p.LossHold)
	}
}

// TestLatenessWithinTheHold: a row confirms its slot up to 2 × MaxLateness
// before calling, so the throttle's hold after a loss must cover that.
func TestLatenessWithinTheHold(t *testing.T) {
	p := throttle.Policy{Limit: 100, Window: time.Minute, Margin: 250 * time.Millisecond, LossHold: time.Minute + 500*time.Millisecond,
		CallTimeout: 20 * time.Second} // two of the default registry timeouts
	cfg := Config{Brokers: []string{"localhost:9092"}}
	if err := cfg.validate(p); err != nil {
		t.Errorf("default lateness with the default hold: %v", err)
	}
	cfg.MaxLateness = 300 * time.Millisecond
	err := cfg.validate(p)
	if err == nil || !strings.Contains(err.Error(), "--max-lateness (300ms)") || !strings.Contains(err.Error(), "at most 125ms") {
		t.Errorf("a 300 ms lateness with a hold of W′ + 250 ms: %v, want an error naming --max-lateness and 125ms", err)
	}
}

// TestTheHoldAfterALossCoversTheCallTimeout: a call may be counted up to
// two registry timeouts after it starts (countedWithin), and it starts up to
// MaxLateness after its slot, so the throttle's policy carries both (its
// latest counts and its hold after a loss are made of them), and a policy
// that covers less than this consumer's timeout is refused.
func TestTheHoldAfterALossCoversTheCallTimeout(t *testing.T) {
	brokers := []string{"localhost:9092"}
	for _, tc := range []struct {
		cfg  Config
		want time.Duration
	}{
		{Config{Brokers: brokers}, 20 * time.Second},
		{Config{Brokers: brokers, CallTimeout: 2 * time.Second}, 4 * time.Second},
		{Config{Brokers: brokers, CallTimeout: 2 * time.Second, MaxLateness: time.Second}, 4 * time.Second},
	} {
		p := tc.cfg.ThrottlePolicy(100, time.Minute, 250*time.Millisecond)
		if p.CallTimeout != tc.want {
			t.Errorf("%+v: policy's call timeout %v, want %v", tc.cfg, p.CallTimeout, tc.want)
		}
		if want := tc.cfg.WithDefaults(p).MaxLateness; p.SendWithin != want {
			t.Errorf("%+v: policy's send bound %v, want the consumer's MaxLateness %v", tc.cfg, p.SendWithin, want)
		}
		if err := tc.cfg.validate(p); err != nil {
			t.Errorf("%+v with its own policy: %v", tc.cfg, err)
		}
	}
	p := Config{Brokers: brokers, CallTimeout: 2 * time.Second}.ThrottlePolicy(100, time.Minute, 250*time.Millisecond)
	err := Config{Brokers: brokers, CallTimeout: 5 * time.Second}.validate(p)
	if err == nil || !strings.Contains(err.Error(), "--registry-timeout 5s") {
		t.Errorf("a 5 s timeout under a policy covering 2 s: %v, want an error naming --registry-timeout", err)
	}
	if err := (Config{Brokers: brokers, CallTimeout: -time.Second}).Validate(); err == nil || !strings.Contains(err.Error(), "call timeout") {
		t.Errorf("a negative call timeout: %v, want an error naming it", err)
	}
}

// TestTheLossHoldCoversACallWithoutAnAnswer: the hold after a loss of
// Redis's data (ThrottlePolicy: LossHold + CallTimeout + the send bound
// beyond the margin, from the loss) and the latest count the throttle's log
// holds for a call (its slot + SendWithin + CallTimeout) must allow the API
// the same time to count a call. The call is the latest one the hold must
// cover: its slot confirmed just before the loss is found (2 × MaxLateness
// ahead), made MaxLateness after its slot, and timed out. The first slot
// after the hold must be at least a window after its latest count.
func TestTheLossHoldCoversACallWithoutAnAnswer(t *testing.T) {
	brokers := []string{"localhost:9092"}
	const margin = 250 * time.Millisecond
	for _, cfg := range []Config{
		{Brokers: brokers},
		{Brokers: brokers, CallTimeout: 600 * time.Millisecond},
		{Brokers: brokers, CallTimeout: 2 * time.Second, MaxLateness: margin},
		{Brokers: brokers, CallTimeout: 2 * time.Second, MaxLateness: 3 * margin},
	} {
		for _, window := range []time.Duration{time.Second, time.Minute} {
			p := cfg.ThrottlePolicy(100, window, margin)
			c := cfg.WithDefaults(p)
			found := time.Unix(1_800_000_000, 0) // the loss is found
			at := found.Add(2 * c.MaxLateness)
			sent := at.Add(c.MaxLateness)
			counted := sent.Add(countedWithin(c.CallTimeout))
			if latest := at.Add(p.SendWithin + p.CallTimeout); latest.Before(counted) {
				t.Errorf("timeout %v, lateness %v: the log holds the call's latest count at %v, before it may be counted (%v)", c.CallTimeout, c.MaxLateness, latest, counted)
			}
			if held := found.Add(p.LossHold + p.CallTimeout + max(0, p.SendWithin-p.Margin)); held.Before(counted.Add(window)) {
				t.Errorf("timeout %v, lateness %v, window %v: the hold after a loss ends %v after it is found, "+
					"but a call in flight then may be counted until %v after, in the API's window until %v: %v too early",
					c.CallTimeout, c.MaxLateness, window, held.Sub(found), counted.Sub(found), counted.Add(window).Sub(found), counted.Add(window).Sub(held))
			}
		}
	}
}
