package uploadstatus

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/redisfail"
	"github.com/bulkreg/bulkreg/lua"
)

// Presence is what Redis says of the upload a row names.
type Presence int

const (
	// UploadFound: the upload's record is there: the producer created it,
	// or rows of it were recorded after Redis lost it (Status.LostAt).
	UploadFound Presence = iota + 1
	// UploadMaybeLost: there is no record, but Redis may have lost it after
	// the row was queued: the throttle's marker of the upload's hash slot is
	// missing, was written by another redis-server process (a restart from
	// disk, a failover), or began (a loss found) less than the slack before
	// the row was queued. Its rows are registered, and recording them says
	// the upload was partly lost.
	UploadMaybeLost
	// UploadMaybeExpired: there is no record, and the row was queued longer
	// than the retention (less the slack) ago, so the record may have
	// expired: a consumer far behind, or a dead letter redriven late. Its
	// rows are registered like those of a lost upload: the seller asked for
	// them, and the status they recreate says the upload was partly lost.
	UploadMaybeExpired
	// UploadNeverCreated: there is no record, and Redis lost nothing of the
	// upload's hash slot since before the row was queued, within the
	// retention. The producer creates every upload before it publishes a
	// row, so no producer published this row: it is a bad message.
	UploadNeverCreated
	// UploadOtherSeller: the record names another seller than the row: a
	// bad message too (ids are derived from the seller).
	UploadOtherSeller
)

func (p Presence) String() string {
	switch p {
	case UploadFound:
		return "found"
	case UploadMaybeLost:
		return "maybe lost"
	case UploadMaybeExpired:
		return "maybe expired"
	case UploadNeverCreated:
		return "never created"
	case UploadOtherSeller:
		return "other seller"
	}
	return "unknown"
}

// Bad reports whether rows of the upload are bad messages.
func (p Presence) Bad() bool { return p == UploadNeverCreated || p == UploadOtherSeller }

// DefaultPresenceSlack is PresenceQuery.Slack's default. It covers the
// producer's clock against Redis's (the row's time is the producer's) and
// the time between creating an upload and stamping its rows (reading and
// recording the file, a publish taken over after its stale time). A longer
// slack only counts more never-created uploads as maybe lost.
const DefaultPresenceSlack = 10 * time.Minute

// PresenceQuery is what Presence asks about.
type PresenceQuery struct {
	UploadID, SellerID string
	// EnqueuedAt is when the producer queued the row (bulkreg.Message.EnqueuedAt).
	EnqueuedAt time.Time
	// Marker is the key of the throttle's marker of the hash slot of the
	// upload's keys: throttle.Markers.For(MetaKey(UploadID)).
	Marker string
	// Slack widens "since before the row was queued"; 0 means DefaultPresenceSlack.
	Slack time.Duration
}

// MetaKey is the key of an upload's fields; every key of the upload is in
// its hash slot.
func MetaKey(id string) string { return key(id, "meta") }

// Presence tells whether q's upload exists, in one round trip that writes
// nothing. See Presence's values for what an absent record means.
func (s *Store) Presence(ctx context.Context, q PresenceQuery) (Presence, error) {
	res, err := redis.NewScript(lua.Script("upload_presence.lua")).Run(ctx, s.rdb, []string{MetaKey(q.UploadID), q.Marker}).Slice()
	if err != nil {
		return 0, fmt.Errorf("look up upload %s: %w", q.UploadID, redisfail.Wrap(err))
	}
	if len(res) != 6 {
		return 0, fmt.Errorf("look up upload %s: unexpected reply %v", q.UploadID, res)
	}
	str := func(v any) string { s, _ := v.(string); return s }
	found, _ := res[0].(int64)
	var r presenceReply
	r.found, r.seller = found == 1, str(res[1])
	if us, err := strconv.ParseInt(str(res[2]), 10, 64); err == nil && us > 0 {
		r.markerSince = time.UnixMicro(us)
	}
	r.markerServer, r.server = str(res[3]), str(res[4])
	ms, err := strconv.ParseInt(str(res[5]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("look up upload %s: unexpected time %v", q.UploadID, res[5])
	}
	r.now = time.UnixMilli(ms)
	return r.judge(q, s.retention), nil
}

// presenceReply is upload_presence.lua's answer.
type presenceReply struct {
	found                bool
	seller               string
	markerSince          time.Time // zero: no marker
	markerServer, server string
	now                  time.Time // Redis clock
}

func (r presenceReply) judge(q PresenceQuery, retention time.Duration) Presence {
	slack := q.Slack
	if slack <= 0 {
		slack = DefaultPresenceSlack
	}
	switch {
	case r.found && r.seller != "" && r.seller != q.SellerID:
		return UploadOtherSeller
	case r.found:
		return UploadFound
	case r.markerSince.IsZero() || r.markerServer != r.server:
		return UploadMaybeLost
	case r.markerSince.After(q.EnqueuedAt.Add(-slack)):
		return UploadMaybeLost
	case r.now.Sub(q.EnqueuedAt) > retention-slack:
		return UploadMaybeExpired
	}
	return UploadNeverCreated
}
