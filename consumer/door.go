package consumer

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

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
// Redis never held was not published by a producer (a hand-written or
// stray message) and is dead-lettered as a bad message, registering
// nothing. What counts as "never held" is uploadstatus.Presence's: an
// upload Redis may have lost, or whose record may have expired, lets its
// rows go on, as before.
//
// An upload is looked up once per process: its first row asks Redis (one
// round trip), every later row of it finds it in known, so the check costs
// no round trip per row.
type uploadDoor struct {
	uploads Uploads
	markers *throttle.Markers
	mu      sync.Mutex
	known   map[string]struct{} // seller + "/" + upload id of uploads whose rows go on
}

func newUploadDoor(u Uploads) *uploadDoor {
	if u == nil {
		return nil
	}
	return &uploadDoor{uploads: u, markers: throttle.NewMarkers(), known: map[string]struct{}{}}
}

func (d *uploadDoor) isKnown(k string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.known[k]
	return ok
}

func (d *uploadDoor) remember(k string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.known) >= maxKnownUploads {
		clear(d.known)
	}
	d.known[k] = struct{}{}
}

// admit reports whether the row may go on. A row of an upload that does not
// exist is dead-lettered (finished); a row whose context ends while Redis
// does not answer is given back. Either way it reports false.
func (c *Consumer) admit(r *row, log *slog.Logger) bool {
	d := c.door
	if d == nil {
		return true
	}
	k := r.m.SellerID + "/" + r.m.UploadID // neither holds a '/'
	if d.isKnown(k) {
		return true
	}
	ctx := r.ctx()
	retry := c.redisBackOff()
	q := uploadstatus.PresenceQuery{UploadID: r.m.UploadID, SellerID: r.m.SellerID, EnqueuedAt: r.m.EnqueuedAt,
		Marker: d.markers.For(uploadstatus.MetaKey(r.m.UploadID)), Slack: c.cfg.UploadPresenceSlack}
	for {
		if !c.redis.wait(ctx) {
			r.giveBack()
			return false
		}
		p, err := d.uploads.Presence(ctx, q)
		if ctx.Err() != nil {
			r.giveBack()
			return false
		}
		if err == nil {
			if !p.Bad() {
				if p != uploadstatus.UploadFound {
					log.Warn("the row's upload has no record in Redis, which may have lost it or let it expire; registering its rows, and the status will say it was partly lost", "presence", p.String())
				}
				d.remember(k)
				return true
			}
			msg := fmt.Sprintf("upload %s does not exist: no producer created it, so no producer published this row; nothing was registered", r.m.UploadID)
			if p == uploadstatus.UploadOtherSeller {
				msg = fmt.Sprintf("upload %s belongs to another seller than %s; nothing was registered", r.m.UploadID, r.m.SellerID)
			}
			log.Error("a row of an upload that does not exist: sending it to the dead-letter topic", "presence", p.String())
			c.deadLetter(r, DeadLetter{Original: r.msg, Class: ClassBadMessage, Message: msg, FirstFailure: time.Now()}, log)
			return false
		}
		if unavailable(err) {
			c.redis.down(err)
		} else {
			log.Error("looking the row's upload up failed, retrying", "err", err)
		}
		if !sleep(ctx, retry.NextBackOff()) {
			r.giveBack()
			return false
		}
	}
}
