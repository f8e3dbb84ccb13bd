package consumer

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/deadletter"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/internal/testwait"
	registryclient "github.com/bulkreg/bulkreg/registry-client"
)

// A row whose seller id is outside the format (a path segment, a line
// break) never reaches a Redis key or the registry's URL: it is dead-lettered
// as a bad message, and the valid row next to it is registered.
func TestBadSellerIDsAreDeadLettered(t *testing.T) {
	f := newFixture(t, 1, func(string, int) registryclient.Result {
		return registryclient.Result{Class: registryclient.Registered, Status: 201, ProductID: "p"}
	})
	f.start()
	bad := []string{"..", "a/b", "a\nb"}
	var msgs []kafka.Message
	for _, id := range bad {
		v, _ := json.Marshal(bulkreg.NewMessage("bad-"+strings.Repeat("x", len(id)), id, 1, bulkreg.Product{SellerSKU: "k", Name: "n", CategoryCode: "1", Price: 1, Stock: 1}, time.Now()))
		msgs = append(msgs, kafka.Message{Key: []byte(id), Value: v})
	}
	testkafka.Produce(t, f.brokers, f.topic, msgs...)
	f.publish("ok", "seller-ok", 1)

	dl := f.dlq(len(bad))
	seen := map[string]bool{}
	for _, m := range dl {
		if got := header(m, deadletter.HeaderErrorClass); got != deadletter.ClassBadMessage {
			t.Errorf("dead letter of key %q has class %q, want %s", m.Key, got, deadletter.ClassBadMessage)
		}
		seen[string(m.Key)] = true
	}
	for _, id := range bad {
		if !seen[id] {
			t.Errorf("no dead letter for seller %q", id)
		}
	}
	testwait.For(t, 10*time.Second, "the valid row registered", func() bool { return f.registeredCount("ok") == 1 })
	f.registry.mu.Lock()
	defer f.registry.mu.Unlock()
	for key := range f.registry.calls {
		if key != "ok:1" {
			t.Errorf("the registry was called for %s, want only ok:1 (the valid seller's row)", key)
		}
	}
}
