package testkafka

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Message is one line of `kcat -J`.
type Message struct {
	Topic     string  `json:"topic"`
	Partition int     `json:"partition"`
	Offset    int64   `json:"offset"`
	Key       *string `json:"key"`
	Payload   string  `json:"payload"`
}

// Consume reads every message of topic with kcat, an independent Kafka
// client (librdkafka), so a test does not check kafka-go with kafka-go:
// -e exits once the end of every partition is reached.
func Consume(t testing.TB, brokers []string, topic string) []Message {
	t.Helper()
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is not installed; run `make deps` (Debian package kcat)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kcat", "-C", "-b", strings.Join(brokers, ","), "-t", topic, "-o", "beginning", "-e", "-J", "-q")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat: %v: %s", err, stderr.String())
	}
	var msgs []Message
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m Message
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("kcat line %q: %v", line, err)
		}
		msgs = append(msgs, m)
	}
	return msgs
}
