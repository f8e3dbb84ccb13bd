package uploadstatus

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/throttle"
)

// TestPresenceJudge: an absent record makes a row bad only when Redis lost
// nothing of the upload's hash slot since before the row was queued and the
// record cannot have expired.
func TestPresenceJudge(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	const retention = 7 * 24 * time.Hour
	q := PresenceQuery{UploadID: "u1", SellerID: "s1", EnqueuedAt: now.Add(-time.Hour)}
	whole := presenceReply{markerSince: now.Add(-48 * time.Hour), markerServer: "run1", server: "run1", now: now}
	with := func(f func(*presenceReply)) presenceReply { r := whole; f(&r); return r }
	cases := []struct {
		name string
		r    presenceReply
		q    PresenceQuery
		want Presence
	}{
		{"created by the producer", with(func(r *presenceReply) { r.found, r.seller = true, "s1" }), q, UploadFound},
		{"recorded after a loss (lost_at, no seller)", with(func(r *presenceReply) { r.found = true }), q, UploadFound},
		{"created for another seller", with(func(r *presenceReply) { r.found, r.seller = true, "s2" }), q, UploadOtherSeller},
		{"absent, slot whole since before the row", whole, q, UploadNeverCreated},
		{"absent, no marker: the slot lost its data", with(func(r *presenceReply) { r.markerSince = time.Time{} }), q, UploadMaybeLost},
		{"absent, marker of another server: restart or failover", with(func(r *presenceReply) { r.markerServer = "run0" }), q, UploadMaybeLost},
		{"absent, loss found after the row was queued", with(func(r *presenceReply) { r.markerSince = now.Add(-time.Minute) }), q, UploadMaybeLost},
		{"absent, loss found within the slack before the row", with(func(r *presenceReply) { r.markerSince = q.EnqueuedAt.Add(-5 * time.Minute) }), q, UploadMaybeLost},
		{"absent, the row older than the retention", with(func(r *presenceReply) { r.markerSince = now.Add(-30 * 24 * time.Hour) }),
			PresenceQuery{UploadID: "u1", SellerID: "s1", EnqueuedAt: now.Add(-8 * 24 * time.Hour)}, UploadMaybeExpired},
	}
	for _, c := range cases {
		if got := c.r.judge(c.q, retention); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestPresenceReadsRedis: the script's answer against a real redis-server.
func TestPresenceReadsRedis(t *testing.T) {
	rdb := testredis.Start(t).Client()
	ctx := context.Background()
	s := New(rdb, time.Hour)
	const marker = "bulkreg:{m0}:marker" // any key: the script reads it as the slot's marker
	if _, err := s.Create(ctx, Upload{ID: "u1", SellerID: "s1", Total: 1, Valid: 1, CreatedAt: time.Now(), State: Publishing}); err != nil {
		t.Fatal(err)
	}
	q := func(id string) PresenceQuery {
		return PresenceQuery{UploadID: id, SellerID: "s1", EnqueuedAt: time.Now(), Marker: marker}
	}
	if p, err := s.Presence(ctx, q("u1")); err != nil || p != UploadFound {
		t.Errorf("created upload: %v, %v; want found", p, err)
	}
	if p, err := s.Presence(ctx, q("u2")); err != nil || p != UploadMaybeLost {
		t.Errorf("absent upload without a marker: %v, %v; want maybe lost", p, err)
	}
	run := rdb.InfoMap(ctx, "server").Item("Server", "run_id")
	old := strconv.FormatInt(time.Now().Add(-24*time.Hour).UnixMicro(), 10)
	if err := rdb.HSet(ctx, marker, "since", old, "server", run).Err(); err != nil {
		t.Fatal(err)
	}
	if p, err := s.Presence(ctx, q("u2")); err != nil || p != UploadNeverCreated {
		t.Errorf("absent upload, slot whole for a day: %v, %v; want never created", p, err)
	}
}

// TestPresenceOnCluster: the upload's meta and its slot's marker are read in
// one script, which Redis Cluster allows only because they share a slot.
func TestPresenceOnCluster(t *testing.T) {
	rdb := testredis.StartCluster(t, 3).Client()
	ctx := context.Background()
	s := New(rdb, time.Hour)
	markers := throttle.NewMarkers()
	for _, id := range []string{"u1", "0123456789abcdef", "up-z"} {
		if _, err := s.Create(ctx, Upload{ID: id, SellerID: "s1", Total: 1, Valid: 1, CreatedAt: time.Now(), State: Publishing}); err != nil {
			t.Fatal(err)
		}
		q := PresenceQuery{UploadID: id, SellerID: "s1", EnqueuedAt: time.Now(), Marker: markers.For(MetaKey(id))}
		if p, err := s.Presence(ctx, q); err != nil || p != UploadFound {
			t.Errorf("%s: %v, %v; want found", id, p, err)
		}
		q.UploadID = id + "-absent"
		q.Marker = markers.For(MetaKey(q.UploadID))
		if p, err := s.Presence(ctx, q); err != nil || p != UploadMaybeLost {
			t.Errorf("%s: %v, %v; want maybe lost (no markers on this cluster)", q.UploadID, p, err)
		}
	}
}
