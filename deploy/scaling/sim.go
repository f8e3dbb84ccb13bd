package main

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"time"
)

// signal is what the autoscaler scales on.
type signal string

const (
	// lagSignal is Kafka consumer lag: per partition, the rows from the
	// group's commit point (the lowest unfinished row) to the end, as a
	// lag-based scaler such as KEDA's Kafka scaler reads it.
	lagSignal signal = "lag"
	// sendableSignal is bulkreg_consumer_sendable_rows summed over the
	// consumers: Σ over sellers of min(rows left, limit).
	sendableSignal signal = "sendable_rows"
)

// quota is the registration API's limit, as bulkreg paces it.
type quota struct {
	Limit  int           // calls per seller
	Window time.Duration // the API's window plus bulkreg's margin
}

// autoscaler is the HPA behaviour a ScaledObject asks for; both rules run
// with the same one, only the signal differs.
type autoscaler struct {
	Min, Max        int
	Threshold       float64       // signal per replica (AverageValue)
	PollingInterval time.Duration // KEDA's pollingInterval (the HPA syncs as often)
	// Scale-down: the highest recommendation within DownWindow wins, and
	// at most DownPods pods go per DownPeriod.
	DownWindow time.Duration
	DownPods   int
	DownPeriod time.Duration
	// Tolerance is the HPA's: no change while |signal ÷ (threshold ×
	// replicas) − 1| is within it (10 % by default).
	Tolerance float64
}

// fleet is what the consumers can do and what changing them costs.
type fleet struct {
	Partitions int
	// CallsPerSecond is one consumer's most calls per second: its
	// connections to the API ÷ the API's latency.
	CallsPerSecond float64
	// StartDelay is from the decision to add a pod until it has joined the
	// group (scheduling, start, first poll).
	StartDelay time.Duration
	// RebalancePause is how long every consumer starts no call when the
	// group's members change (an eager rebalance: revoke all, rejoin).
	RebalancePause time.Duration
}

// upload is one seller's spreadsheet, published at At.
type upload struct {
	Seller string
	Rows   int
	At     time.Duration
}

// burst is n uploads arriving within spread: the first seller has big rows,
// the others between lo and hi, drawn from seed.
func burst(seed uint64, n, big, lo, hi int, spread time.Duration) []upload {
	r := rand.New(rand.NewPCG(seed, 0))
	out := make([]upload, n)
	for i := range out {
		rows := lo + r.IntN(hi-lo+1)
		if i == 0 {
			rows = big
		}
		out[i] = upload{Seller: fmt.Sprintf("seller-%03d", i), Rows: rows, At: time.Duration(r.Float64() * float64(spread))}
	}
	return out
}

// partitionOf is kafka-go's Hash balancer (the producer's): FNV-1a of the
// key, as an int32, modulo the partitions, made positive.
func partitionOf(key string, partitions int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	p := int32(h.Sum32()) % int32(partitions)
	if p < 0 {
		p = -p
	}
	return int(p)
}

// sample is the state at one poll of the autoscaler.
type sample struct {
	T        float64 `json:"t_s"`
	Replicas int     `json:"replicas"`
	Ready    int     `json:"ready"`
	Signal   float64 `json:"signal"`
}

// outcome is one rule's run.
type outcome struct {
	// Left is the rows not registered by the end of the run (0 unless
	// the run hit its time limit).
	Left         int     `json:"rows_left"`
	Signal       signal  `json:"signal"`
	FinishS      float64 `json:"finish_s"`      // the last registration
	DoneS        float64 `json:"back_to_min_s"` // every row done and replicas back at the minimum
	PeakReplicas int     `json:"peak_replicas"`
	Rebalances   int     `json:"rebalances"`
	// ConsumerMinutes counts every pod that exists, starting ones
	// included, up to the common horizon of the comparison.
	ConsumerMinutes float64 `json:"consumer_minutes"`
	// IdleMinutes counts ready consumers with no row the quota lets
	// through: the sleepers.
	IdleMinutes float64  `json:"idle_consumer_minutes"`
	Timeline    []sample `json:"-"`
	// Calls are each seller's call times, for the tests' quota checks.
	Calls      map[string][]float64 `json:"-"`
	podSeconds float64
}

type sellerState struct {
	partition, rows, sent int
	at                    float64
	calls                 []float64 // times of its calls, in order
	first                 int       // calls before it are out of the window
}

// simulate replays the uploads through a fleet scaled on sig, in steps of
// dt, until every row is registered and the replicas are back at the
// minimum (or maxT passes).
func simulate(q quota, a autoscaler, f fleet, uploads []upload, sig signal, dt, maxT time.Duration) outcome {
	step, window := dt.Seconds(), q.Window.Seconds()
	sellers := make([]*sellerState, len(uploads))
	total := 0
	// Rows on each partition in offset order: uploads by arrival, each
	// upload's rows contiguous (one producer batch per upload).
	order := make([]int, len(uploads))
	for i := range uploads {
		order[i] = i
		sellers[i] = &sellerState{partition: partitionOf(uploads[i].Seller, f.Partitions), rows: uploads[i].Rows, at: uploads[i].At.Seconds()}
		total += uploads[i].Rows
	}
	for i := 1; i < len(order); i++ { // insertion sort by arrival: n is small
		for j := i; j > 0 && sellers[order[j]].at < sellers[order[j-1]].at; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	byPartition := make([][]int, f.Partitions)
	for _, i := range order {
		byPartition[sellers[i].partition] = append(byPartition[sellers[i].partition], i)
	}

	type pod struct{ readyAt float64 }
	pods := make([]pod, a.Min)
	members, pauseUntil := a.Min, 0.0
	var history []struct {
		t       float64
		desired int
	}
	var removals []float64
	budget := []float64{}
	rr := []int{}
	out := outcome{Signal: sig}
	done := 0
	nextPoll := 0.0

	signalNow := func(t float64) float64 {
		var v float64
		switch sig {
		case sendableSignal:
			for _, s := range sellers {
				if s.at <= t {
					v += float64(min(s.rows-s.sent, q.Limit))
				}
			}
		case lagSignal:
			for _, idx := range byPartition {
				committed, end := 0, 0
				open := true
				for _, i := range idx {
					s := sellers[i]
					if s.at > t {
						break
					}
					end += s.rows
					if open {
						committed += s.sent
						open = s.sent == s.rows
					}
				}
				v += float64(end - committed)
			}
		}
		return v
	}

	for t := 0.0; t <= maxT.Seconds(); t += step {
		if t >= nextPoll-step/2 {
			pollT := nextPoll
			nextPoll += a.PollingInterval.Seconds()
			v := signalNow(t)
			cur := len(pods)
			desired := cur
			if math.Abs(v/(a.Threshold*float64(cur))-1) > a.Tolerance {
				desired = int(math.Ceil(v / a.Threshold))
			}
			desired = max(a.Min, min(a.Max, desired))
			history = append(history, struct {
				t       float64
				desired int
			}{pollT, desired})
			switch {
			case desired > cur:
				up := min(desired, max(2*cur, cur+4)) // the HPA's default scale-up policies
				for range up - cur {
					pods = append(pods, pod{readyAt: t + f.StartDelay.Seconds()})
				}
			default:
				stab := 0
				for _, h := range history {
					if h.t > pollT-a.DownWindow.Seconds() {
						stab = max(stab, h.desired)
					}
				}
				recent := 0
				for _, r := range removals {
					if r > pollT-a.DownPeriod.Seconds() {
						recent++
					}
				}
				target := max(stab, cur-max(0, a.DownPods-recent))
				for len(pods) > target {
					// The newest pod goes first; one not yet ready leaves no gap.
					pods = pods[:len(pods)-1]
					removals = append(removals, pollT)
				}
			}
			out.Timeline = append(out.Timeline, sample{T: pollT, Replicas: len(pods), Signal: v})
			out.PeakReplicas = max(out.PeakReplicas, len(pods))
		}
		ready := 0
		for _, p := range pods {
			if p.readyAt <= t {
				ready++
			}
		}
		if ready != members {
			members = ready
			pauseUntil = t + f.RebalancePause.Seconds()
			out.Rebalances++
		}
		if len(out.Timeline) > 0 && out.Timeline[len(out.Timeline)-1].T > t-step/2 {
			out.Timeline[len(out.Timeline)-1].Ready = ready
		}
		out.podSeconds += float64(len(pods)) * step
		for len(budget) < members {
			budget, rr = append(budget, 0), append(rr, 0)
		}
		// Range assignment: member m owns a contiguous run of partitions,
		// the first P mod M members one more.
		for m := 0; m < members; m++ {
			lo, hi := rangeOf(m, members, f.Partitions)
			var eligible []*sellerState
			for p := lo; p < hi; p++ {
				for _, i := range byPartition[p] {
					s := sellers[i]
					for s.first < len(s.calls) && s.calls[s.first] <= t-window {
						s.first++
					}
					if s.at <= t && s.sent < s.rows && len(s.calls)-s.first < q.Limit {
						eligible = append(eligible, s)
					}
				}
			}
			if len(eligible) == 0 {
				out.IdleMinutes += step / 60
				budget[m] = 0
				continue
			}
			if t < pauseUntil {
				continue
			}
			// No banking: a consumer that could not call cannot catch up
			// faster than its connections allow.
			budget[m] = min(budget[m]+f.CallsPerSecond*step, f.CallsPerSecond*step+1)
			for budget[m] >= 1 && len(eligible) > 0 {
				k := rr[m] % len(eligible)
				s := eligible[k]
				s.sent++
				s.calls = append(s.calls, t)
				done++
				out.FinishS = t
				budget[m]--
				rr[m]++
				if s.sent == s.rows || len(s.calls)-s.first >= q.Limit {
					eligible = append(eligible[:k], eligible[k+1:]...)
				}
			}
		}
		if done == total && len(pods) == a.Min {
			out.DoneS = t
			break
		}
	}
	out.Left = total - done
	if out.DoneS == 0 { // not done by maxT
		out.DoneS = maxT.Seconds()
	}
	out.Calls = map[string][]float64{}
	for i, s := range sellers {
		out.Calls[uploads[i].Seller] = s.calls
	}
	return out
}

// rangeOf is the partitions [lo, hi) Kafka's range assignor gives member m
// of n.
func rangeOf(m, n, partitions int) (lo, hi int) {
	per, extra := partitions/n, partitions%n
	lo = m*per + min(m, extra)
	hi = lo + per
	if m < extra {
		hi++
	}
	return lo, hi
}
