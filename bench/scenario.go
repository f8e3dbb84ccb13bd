// The scenarios: who uploads how many rows, and publishing them.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg"
)

// sellerGroup is Sellers sellers with RowsEach rows each.
type sellerGroup struct {
	Sellers  int `json:"sellers"`
	RowsEach int `json:"rows_each"`
}

type scenario struct {
	Name       string
	Groups     []sellerGroup // published in this order
	Consumers  int
	Partitions int
	Limit      int // per seller per Window
	Window     time.Duration
	Margin     time.Duration
	Latency    time.Duration // the sandbox's, before it handles a call
	// GlobalLimit per GlobalWindow for the whole application; 0: none.
	GlobalLimit  int
	GlobalWindow time.Duration
	// Idle, with no Groups: nothing is published and the consumers are
	// measured for this long, idleSettle after their group is stable.
	Idle time.Duration
}

// idleSettle passes between the group's becoming stable and an idle
// scenario's span: the readers' first fetches and the first connections to
// Redis belong to a consumer's start, not to its waiting.
const idleSettle = 5 * time.Second

func scenarios() []scenario {
	const w = 3 * time.Second
	return []scenario{
		{Name: "one-seller", Groups: []sellerGroup{{1, 500}}, Consumers: 4, Partitions: 4, Limit: 100, Window: w, Margin: 50 * time.Millisecond, Latency: 5 * time.Millisecond},
		{Name: "many-sellers", Groups: []sellerGroup{{100, 500}}, Consumers: 4, Partitions: 8, Limit: 100, Window: w, Margin: 100 * time.Millisecond, Latency: 5 * time.Millisecond},
		{Name: "global", Groups: []sellerGroup{{1, 500}, {19, 10}}, Consumers: 4, Partitions: 8, Limit: 100, Window: w, Margin: 100 * time.Millisecond, Latency: 5 * time.Millisecond,
			GlobalLimit: 200, GlobalWindow: w},
		{Name: "idle", Consumers: 4, Partitions: 8, Limit: 100, Window: w, Margin: 100 * time.Millisecond, Latency: 5 * time.Millisecond,
			Idle: 20 * time.Second},
	}
}

func (sc scenario) sellers() int {
	n := 0
	for _, g := range sc.Groups {
		n += g.Sellers
	}
	return n
}

func (sc scenario) rows() int {
	n := 0
	for _, g := range sc.Groups {
		n += g.Sellers * g.RowsEach
	}
	return n
}

// finishWindow is the unit the sellers' finish times are given in: the
// app-wide window when there is one, else the seller window.
func (sc scenario) finishWindow() time.Duration {
	if sc.GlobalLimit > 0 {
		return sc.GlobalWindow
	}
	return sc.Window
}

// eachSeller calls fn for every seller with its group and rows, in
// publishing order.
func (sc scenario) eachSeller(fn func(id string, group, rows int)) {
	i := 0
	for gi, g := range sc.Groups {
		for range g.Sellers {
			fn(fmt.Sprintf("seller-%03d", i), gi, g.RowsEach)
			i++
		}
	}
}

func publish(ctx context.Context, brokers []string, topic string, sc scenario) error {
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, Balancer: &kafka.Hash{}, BatchSize: 500, BatchTimeout: 5 * time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	now := time.Now()
	var err error
	sc.eachSeller(func(seller string, _, rows int) {
		if err != nil {
			return
		}
		msgs := make([]kafka.Message, 0, rows)
		for i := 1; i <= rows; i++ {
			p := bulkreg.Product{SellerSKU: fmt.Sprintf("%s-%d", seller, i), Name: "bench product", CategoryCode: "50000001", Price: 12000, Stock: 10}
			v, merr := json.Marshal(bulkreg.NewMessage("up-"+seller, seller, i, p, now))
			if merr != nil {
				err = merr
				return
			}
			msgs = append(msgs, kafka.Message{Key: []byte(seller), Value: v})
		}
		if werr := w.WriteMessages(ctx, msgs...); werr != nil {
			err = fmt.Errorf("publish seller %s: %w", seller, werr)
		}
	})
	return err
}
