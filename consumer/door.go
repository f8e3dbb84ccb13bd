package consumer

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/bulkreg/bulkreg/deadletter"
	"github.com/bulkreg/bulkreg/throttle"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// Uploads tells whether the upload a row names exists (*uploadstatus.Store).
type Uploads interface {
	Presence(ctx context.Context, q uploadstatus.PresenceQuery) (uploadstatus.Presence, error)
}

// maxKnownUploads bounds the uploads a consumer remembers as checked; past
// it the memory starts again, costing one round trip per upload met again.
// A consumer meets a few hundred uploads in a window at most.
const maxKnownUploads = 4096

// uploadDoor lets a row go on only if its upload exists: the producer
// creates every upload before it publishes a row, so a row of an upload
// Redis never held was not published by a producer (a hand-written or stray
// message) and is dead-lettered as a bad message, registering nothing. What
// counts as "never held" is uploadstatus.Presence's: an upload Redis may
// have lost, or whose record may have expired, lets its rows go on.
// An upload is looked up once per process (two lookups at once are rare and
// harmless); every later row finds it in known.
type uploadDoor struct {
	markers *throttle.Markers

	mu    sync.Mutex
	known map[uploadKey]struct{} // uploads whose rows go on
}

// uploadKey names an upload as a row does: a row of a known upload naming
// another seller is looked up again (and refused).
type uploadKey struct{ seller, upload string }

// has reports whether k's rows go on, and with remember true makes it so.
func (d *uploadDoor) has(k uploadKey, remember bool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if remember {
		if len(d.known) >= maxKnownUploads {
			clear(d.known)
		}
		d.known[k] = struct{}{}
	}
	_, ok := d.known[k]
	return ok
}

// admit reports whether the row may go on. A row of an upload that does not
// exist is dead-lettered (finished); a row whose context ends while Redis
// does not answer is given back. Either way it reports false.
func (c *Consumer) admit(r *row, log *slog.Logger) bool {
	d := c.door
	k := uploadKey{seller: r.m.SellerID, upload: r.m.UploadID}
	if d.has(k, false) {
		return true
	}
	ctx := r.ctx()
	var p uploadstatus.Presence
	err := c.untilRedis(ctx, "look the row's upload up", log, c.gated(func(ctx context.Context) error {
		var err error
		p, err = c.deps.Uploads.Presence(ctx, uploadstatus.PresenceQuery{UploadID: r.m.UploadID, SellerID: r.m.SellerID, EnqueuedAt: r.m.EnqueuedAt,
			Marker: d.markers.For(uploadstatus.MetaKey(r.m.UploadID)), Slack: c.cfg.UploadPresenceSlack})
		return err
	}))
	switch {
	case err != nil || ctx.Err() != nil:
		r.GiveBack()
		return false
	case !p.Bad():
		if p != uploadstatus.UploadFound {
			log.Warn("the row's upload has no record in Redis, which may have lost it or let it expire; registering its rows, and the status will say it was partly lost", "presence", p.String())
		}
		return d.has(k, true)
	}
	msg := fmt.Sprintf("upload %s does not exist: no producer created it, so no producer published this row; nothing was registered", r.m.UploadID)
	if p == uploadstatus.UploadOtherSeller {
		msg = fmt.Sprintf("upload %s belongs to another seller than %s; nothing was registered", r.m.UploadID, r.m.SellerID)
	}
	log.Error("a row of an upload that does not exist: sending it to the dead-letter topic", "presence", p.String())
	c.deadLetter(r, deadletter.Row{Original: r.Msg, Class: deadletter.ClassBadMessage, Message: msg, FirstFailure: time.Now()}, nil, log)
	return false
}
