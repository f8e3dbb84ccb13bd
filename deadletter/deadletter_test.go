package deadletter

import (
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

func TestKafkaMessage(t *testing.T) {
	first := time.Date(2026, 11, 23, 10, 0, 0, 5, time.UTC)
	orig := kafka.Message{Topic: "rows", Partition: 3, Offset: 42, Key: []byte("s1"), Value: []byte(`{"v":1}`),
		Headers: []kafka.Header{
			{Key: "bulkreg-redrive-count", Value: []byte("2")},
			{Key: "bulkreg-redrive-time", Value: []byte("2026-11-23T09:00:00Z")},
			{Key: "something-else", Value: []byte("x")},
		}}
	m := Row{Original: orig, Class: "transient", Message: "503", Attempts: 8, FirstFailure: first}.KafkaMessage()
	if string(m.Key) != "s1" || string(m.Value) != `{"v":1}` {
		t.Errorf("key %q value %q, want the original's", m.Key, m.Value)
	}
	got := map[string]string{}
	for _, h := range m.Headers {
		got[h.Key] = string(h.Value)
	}
	want := map[string]string{
		HeaderTopic: "rows", HeaderPartition: "3", HeaderOffset: "42", HeaderErrorClass: "transient",
		HeaderErrorMessage: "503", HeaderAttempts: "8", HeaderFirstFailure: "2026-11-23T10:00:00.000000005Z",
		"bulkreg-redrive-count": "2", "bulkreg-redrive-time": "2026-11-23T09:00:00Z",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("header %s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("headers %v, want exactly %v (other original headers are not carried)", got, want)
	}
}
