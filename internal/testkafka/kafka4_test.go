package testkafka

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// roundTrip sends req on conn and reads the answer into resp; an error
// means the broker closed the connection instead of answering.
func roundTrip(conn net.Conn, rd *bufio.Reader, req kmsg.Request, resp kmsg.Response) error {
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("kip896-test")).AppendRequest(nil, req, 1)); err != nil {
		return err
	}
	var size int32
	if err := binary.Read(rd, binary.BigEndian, &size); err != nil {
		return err
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(rd, body); err != nil {
		return err
	}
	resp.SetVersion(req.GetVersion())
	skip := 4 // correlation id
	if resp.IsFlexible() {
		skip++ // empty tagged fields of the response header
	}
	return resp.ReadFrom(body[skip:])
}

// TestKafka4RefusesRemovedVersions: the broker advertises 4.0's minima and
// closes the connection on a request of a removed version, as Kafka 4.0
// does, and answers the versions it keeps.
func TestKafka4RefusesRemovedVersions(t *testing.T) {
	k := StartKafka4(t, 1, []string{"t"})
	dial := func() (net.Conn, *bufio.Reader) {
		conn, err := net.Dial("tcp", k.Brokers[0])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn, bufio.NewReader(conn)
	}

	conn, rd := dial()
	av := kmsg.NewPtrApiVersionsRequest()
	avResp := kmsg.NewPtrApiVersionsResponse()
	if err := roundTrip(conn, rd, av, avResp); err != nil {
		t.Fatalf("ApiVersions v0: %v", err)
	}
	mins := map[int16]int16{}
	for _, key := range avResp.ApiKeys {
		mins[key.ApiKey] = key.MinVersion
	}
	for key, want := range map[int16]int16{1: 4, 2: 1, 8: 2, 9: 1, 11: 2, 3: 0, 10: 0} {
		if mins[key] != want {
			t.Errorf("ApiVersions advertises %s from v%d, want v%d", kmsg.NameForKey(key), mins[key], want)
		}
	}

	for _, tc := range []struct {
		req     kmsg.Request
		version int16
		refused bool
	}{
		{kmsg.NewPtrOffsetFetchRequest(), 0, true},
		{kmsg.NewPtrOffsetFetchRequest(), 1, false},
		{kmsg.NewPtrOffsetCommitRequest(), 1, true},
		{kmsg.NewPtrOffsetCommitRequest(), 2, false},
		{kmsg.NewPtrListOffsetsRequest(), 0, true},
		{kmsg.NewPtrListOffsetsRequest(), 1, false},
		{kmsg.NewPtrJoinGroupRequest(), 1, true},
		{kmsg.NewPtrFetchRequest(), 3, true},
		{kmsg.NewPtrProduceRequest(), 2, true},
		{kmsg.NewPtrMetadataRequest(), 1, false},
		{kmsg.NewPtrFindCoordinatorRequest(), 0, false},
	} {
		conn, rd := dial()
		tc.req.SetVersion(tc.version)
		err := roundTrip(conn, rd, tc.req, tc.req.ResponseKind())
		if refused := err != nil; refused != tc.refused {
			t.Errorf("%s v%d: error %v, want refused=%v", kmsg.NameForKey(tc.req.Key()), tc.version, err, tc.refused)
		}
	}
	var got []string
	for _, r := range k.Refused() {
		got = append(got, r.String())
	}
	if want := "[OffsetFetch v0 OffsetCommit v1 ListOffsets v0 JoinGroup v1 Fetch v3 Produce v2]"; fmt.Sprint(got) != want {
		t.Errorf("refusals recorded: %v, want %s", got, want)
	}
}
