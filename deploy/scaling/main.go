// Command scaling replays an upload burst through two autoscaling rules for
// the consumers and prints JSON: replicas over time, when the last row was
// registered and the consumer-minutes each rule spent. One rule scales on
// Kafka lag, the other on bulkreg_consumer_sendable_rows (the quota-aware
// backlog); both use the ScaledObject of deploy/k8s/overlays/production as
// rendered by kustomize (threshold, range, polling, scale-down behaviour),
// so what is compared is what is shipped.
//
// It lives in the deploy module (deploy/go.mod), beside the manifests it
// reads, so from the repository's root:
//
//	go -C deploy run ./scaling
//	go -C deploy run ./scaling -latency 1s -conns 16   # where the consumers are the bottleneck
//
// It is a model, not a cluster: each seller gets at most limit calls in any
// trailing window plus margin; a consumer makes at most conns ÷ latency
// calls per second, shared round-robin between the sellers of the
// partitions it owns (range assignment); a new pod joins after -start-delay;
// every change of the group's members stops every consumer for
// -rebalance-pause; the HPA follows its documented algorithm (tolerance,
// scale-up policies, scale-down stabilization and policies).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/bulkreg/bulkreg/deploy/internal/kubecheck"
)

// scenario is one burst under one fleet.
type scenario struct {
	Name        string  `json:"name"`
	About       string  `json:"about"`
	Sellers     int     `json:"sellers"`
	BigRows     int     `json:"rows_of_the_first_seller"`
	OtherRows   [2]int  `json:"rows_of_the_others"`
	Conns       int     `json:"connections_per_consumer"`
	LatencyS    float64 `json:"api_latency_s"`
	CallsPerSec float64 `json:"calls_per_s_per_consumer"`
	Threshold   float64 `json:"threshold_rows_per_replica"`
}

type comparison struct {
	scenario
	Rows     int        `json:"rows"`
	HorizonS float64    `json:"horizon_s"`
	Lag      outcome    `json:"lag_rule"`
	Backlog  outcome    `json:"backlog_rule"`
	Timeline []timeline `json:"timeline"`
	// SavedConsumerMinutes is the lag rule's consumer-minutes less the
	// backlog rule's; FinishDeltaS the backlog rule's finish less the lag
	// rule's (positive: later).
	SavedConsumerMinutes float64 `json:"saved_consumer_minutes"`
	FinishDeltaS         float64 `json:"finish_delta_s"`
}

// timeline puts both rules side by side at each poll.
type timeline struct {
	T               float64 `json:"t_s"`
	LagReplicas     int     `json:"lag_rule_replicas"`
	Lag             float64 `json:"lag_rows"`
	BacklogReplicas int     `json:"backlog_rule_replicas"`
	Sendable        float64 `json:"sendable_rows"`
}

func main() {
	overlay := flag.String("overlay", "", "kustomize directory whose ScaledObject and topics Job to replay (default: deploy/k8s/overlays/production of the checkout around the working directory)")
	latency := flag.Duration("latency", 500*time.Millisecond, "the registration API's latency per call (an assumption: use your p95)")
	conns := flag.Int("conns", 0, "connections per consumer (0: the overlay's BULKREG_REGISTRY_MAX_CONNS)")
	seed := flag.Uint64("seed", 1, "seed of the burst's row counts and arrival times")
	startDelay := flag.Duration("start-delay", 10*time.Second, "from scaling up until the new consumer has joined the group")
	pause := flag.Duration("rebalance-pause", 3*time.Second, "how long a change of the group's members stops every consumer")
	flag.Parse()
	if err := run(*overlay, *latency, *conns, *seed, *startDelay, *pause); err != nil {
		fmt.Fprintln(os.Stderr, "scaling:", err)
		os.Exit(1)
	}
}

// shipped is what the simulation reads from the manifests.
type shipped struct {
	a      autoscaler
	q      quota
	parts  int
	conns  int
	source string
}

func load(dir string) (shipped, error) {
	objs, err := kubecheck.Render(dir)
	if err != nil {
		return shipped{}, err
	}
	d, err := kubecheck.Validate(objs)
	if err != nil {
		return shipped{}, err
	}
	if len(d.ScaledObjects) != 1 {
		return shipped{}, fmt.Errorf("%s renders %d ScaledObjects, want 1", dir, len(d.ScaledObjects))
	}
	so := d.ScaledObjects[0]
	s := shipped{source: dir}
	minimum, maximum := so.Replicas()
	s.a = autoscaler{Min: int(minimum), Max: int(maximum), PollingInterval: 30 * time.Second, Tolerance: 0.1, DownPods: math.MaxInt32, DownPeriod: 15 * time.Second}
	if so.Spec.PollingInterval != nil {
		s.a.PollingInterval = time.Duration(*so.Spec.PollingInterval) * time.Second
	}
	if len(so.Spec.Triggers) != 1 {
		return shipped{}, fmt.Errorf("%s: want one trigger, got %d", so.ID(), len(so.Spec.Triggers))
	}
	if s.a.Threshold, err = strconv.ParseFloat(so.Spec.Triggers[0].Metadata["threshold"], 64); err != nil {
		return shipped{}, fmt.Errorf("%s: threshold: %w", so.ID(), err)
	}
	w, rules := so.ScaleDown()
	s.a.DownWindow = time.Duration(w) * time.Second
	if rules != nil {
		for _, p := range rules.Policies {
			if p.Type == "Pods" {
				s.a.DownPods, s.a.DownPeriod = int(p.Value), time.Duration(p.PeriodSeconds)*time.Second
			}
		}
	}
	cm := map[string]string{}
	for _, c := range d.ConfigMaps {
		for k, v := range c.Data {
			cm[k] = v
		}
	}
	var errs []error
	if s.q.Limit, err = strconv.Atoi(cm["BULKREG_LIMIT"]); err != nil {
		errs = append(errs, fmt.Errorf("BULKREG_LIMIT: %w", err))
	}
	window, err := time.ParseDuration(cm["BULKREG_WINDOW"])
	errs = append(errs, err)
	margin, err := time.ParseDuration(cm["BULKREG_MARGIN"])
	errs = append(errs, err)
	s.q.Window = window + margin
	if s.conns, err = strconv.Atoi(cm["BULKREG_REGISTRY_MAX_CONNS"]); err != nil {
		errs = append(errs, fmt.Errorf("BULKREG_REGISTRY_MAX_CONNS: %w", err))
	}
	for _, j := range d.Jobs {
		for _, e := range j.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "PARTITIONS" {
				s.parts, err = strconv.Atoi(e.Value)
				errs = append(errs, err)
			}
		}
	}
	if s.parts == 0 {
		errs = append(errs, errors.New("no topics Job with PARTITIONS"))
	}
	if err := errors.Join(errs...); err != nil {
		return shipped{}, fmt.Errorf("%s: %w", dir, err)
	}
	return s, nil
}

// productionOverlay is the directory the model replays by default, relative
// to the deploy module's root.
const productionOverlay = "k8s/overlays/production"

// shippedOverlay finds deploy/k8s/overlays/production from the working
// directory: in the first directory above it (itself included) that holds
// the overlay, either as the deploy module (k8s/overlays/production) or as
// the repository's root (deploy/k8s/overlays/production).
func shippedOverlay() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find the production overlay: %w", err)
	}
	for {
		for _, rel := range []string{productionOverlay, filepath.Join("deploy", productionOverlay)} {
			o := filepath.Join(dir, rel)
			if _, err := os.Stat(filepath.Join(o, "kustomization.yaml")); err == nil {
				return o, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no deploy/k8s/overlays/production above the working directory: pass -overlay")
		}
		dir = parent
	}
}

func run(overlay string, latency time.Duration, conns int, seed uint64, startDelay, pause time.Duration) error {
	if overlay == "" {
		var err error
		if overlay, err = shippedOverlay(); err != nil {
			return err
		}
	}
	s, err := load(overlay)
	if err != nil {
		return err
	}
	if conns == 0 {
		conns = s.conns
	}
	results := compareAll(s, latency, conns, seed, startDelay, pause)
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{
		"source": "the ScaledObject and topics Job of " + overlay + " (kustomize build)",
		"model": fmt.Sprintf("limit %d per %s (window + margin) per seller; a consumer makes at most connections ÷ latency calls/s; %d partitions, range assignment; "+
			"a new pod joins %s after the decision; each change of members stops all consumers %s; HPA: tolerance 10%%, scale-up max(100%%, 4 pods) per poll, "+
			"scale-down stabilization %s, then %s; both rules use the threshold of their scenario",
			s.q.Limit, s.q.Window, s.parts, startDelay, pause, s.a.DownWindow, downPolicy(s.a)),
		"autoscaler": map[string]any{"min": s.a.Min, "max": s.a.Max, "threshold": s.a.Threshold, "polling_s": s.a.PollingInterval.Seconds()},
		"scenarios":  results,
	})
}

// compareAll runs the scenarios docs/production.md quotes: a burst of 50
// sellers at the shipped calibration, the same burst where the consumers are the
// bottleneck, and a burst of large uploads.
func compareAll(s shipped, latency time.Duration, conns int, seed uint64, startDelay, pause time.Duration) []comparison {
	perSecond := float64(conns) / latency.Seconds()
	slowConns, slowLatency := 16, time.Second
	slow := float64(slowConns) / slowLatency.Seconds()
	// The shipped threshold is one consumer's calls in one polling
	// interval; the slow-API scenario keeps that rule for its own rate.
	slowThreshold := slow * s.a.PollingInterval.Seconds()
	cases := []struct {
		sc      scenario
		uploads []upload
	}{
		{scenario{Name: "issue-burst", About: "50 sellers, one with 500 rows, the others 20–100, arriving within 30 s; the shipped threshold",
			Sellers: 50, BigRows: 500, OtherRows: [2]int{20, 100}, Conns: conns, LatencyS: latency.Seconds(), CallsPerSec: perSecond, Threshold: s.a.Threshold},
			burst(seed, 50, 500, 20, 100, 30*time.Second)},
		{scenario{Name: "issue-burst-slow-api", About: "the same burst where the consumers are the bottleneck: 16 connections per consumer, 1 s per call; threshold = that rate × the polling interval, as for the shipped one",
			Sellers: 50, BigRows: 500, OtherRows: [2]int{20, 100}, Conns: slowConns, LatencyS: slowLatency.Seconds(), CallsPerSec: slow, Threshold: slowThreshold},
			burst(seed, 50, 500, 20, 100, 30*time.Second)},
		{scenario{Name: "large-uploads", About: "50 sellers with 500 rows each, arriving within 30 s; the shipped threshold",
			Sellers: 50, BigRows: 500, OtherRows: [2]int{500, 500}, Conns: conns, LatencyS: latency.Seconds(), CallsPerSec: perSecond, Threshold: s.a.Threshold},
			burst(seed, 50, 500, 500, 500, 30*time.Second)},
	}
	var out []comparison
	for _, c := range cases {
		out = append(out, compare(c.sc, c.uploads, s, startDelay, pause))
	}
	return out
}

// compare runs both rules on one burst and lines them up over a common
// horizon: after a rule is done it keeps its minimum, which costs both
// rules the same.
func compare(sc scenario, uploads []upload, s shipped, startDelay, pause time.Duration) comparison {
	a := s.a
	a.Threshold = sc.Threshold
	f := fleet{Partitions: s.parts, CallsPerSecond: sc.CallsPerSec, StartDelay: startDelay, RebalancePause: pause}
	const dt, maxT = 100 * time.Millisecond, 2 * time.Hour
	lag := simulate(s.q, a, f, uploads, lagSignal, dt, maxT)
	backlog := simulate(s.q, a, f, uploads, sendableSignal, dt, maxT)
	c := comparison{scenario: sc, Lag: lag, Backlog: backlog, HorizonS: max(lag.DoneS, backlog.DoneS)}
	for _, u := range uploads {
		c.Rows += u.Rows
	}
	for _, o := range []*outcome{&c.Lag, &c.Backlog} {
		o.ConsumerMinutes = round((o.podSeconds + (c.HorizonS-o.DoneS)*float64(a.Min)) / 60)
		o.IdleMinutes = round(o.IdleMinutes)
		o.FinishS, o.DoneS = round(o.FinishS), round(o.DoneS)
	}
	c.SavedConsumerMinutes = round(c.Lag.ConsumerMinutes - c.Backlog.ConsumerMinutes)
	c.FinishDeltaS = round(c.Backlog.FinishS - c.Lag.FinishS)
	at := func(tl []sample, i int) sample {
		if i < len(tl) {
			return tl[i]
		}
		last := tl[len(tl)-1]
		return sample{Replicas: a.Min, Ready: a.Min, Signal: 0, T: last.T}
	}
	for i := range max(len(lag.Timeline), len(backlog.Timeline)) {
		l, b := at(lag.Timeline, i), at(backlog.Timeline, i)
		c.Timeline = append(c.Timeline, timeline{T: float64(i) * a.PollingInterval.Seconds(), LagReplicas: l.Replicas, Lag: l.Signal, BacklogReplicas: b.Replicas, Sendable: b.Signal})
	}
	return c
}

func downPolicy(a autoscaler) string {
	if a.DownPods == math.MaxInt32 {
		return "every surplus pod at once (the HPA's default policy)"
	}
	return fmt.Sprintf("at most %d pods per %s", a.DownPods, a.DownPeriod)
}

func round(f float64) float64 { return math.Round(f*100) / 100 }
