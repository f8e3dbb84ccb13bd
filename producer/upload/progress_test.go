package upload

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/throttle"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// TestFinishEstimateIsTheLastSlot: two uploads of one seller, 8 and 7
// rows, at 5 rows per 1.1 s. Before any row is called, the estimate of the
// first is the second window and that of the second (its rows come after
// the first's) the third. Rows then take their slots from the throttle and
// are recorded, as the consumers do; every estimate read meanwhile must be
// within a tolerance of the real finish of its upload.
func TestFinishEstimateIsTheLastSlot(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil, WriterOptions{})
	rdb := e.rdb
	// A new Redis, declared so: no first-window hold (throttle.Initialize).
	if _, err := throttle.Initialize(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	p := throttle.Policy{Limit: 5, Window: time.Second, Margin: 100 * time.Millisecond, MaxWait: time.Minute}
	th, err := throttle.New(rdb, p)
	if err != nil {
		t.Fatal(err)
	}
	e.up.Slots = th
	const seller = "eta-seller"
	a, err := e.up.Upload(ctx, Request{SellerID: seller, FileName: "a.xlsx", Data: xlsx(t, "eta-a", validRows(8)...)})
	if err != nil {
		t.Fatal(err)
	}
	rowsB := validRows(15)[8:]
	b, err := e.up.Upload(ctx, Request{SellerID: seller, FileName: "b.xlsx", Data: xlsx(t, "eta-b", rowsB...)})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	pa, err := e.up.Progress(ctx, seller, a.UploadID)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := e.up.Progress(ctx, seller, b.UploadID)
	if err != nil {
		t.Fatal(err)
	}
	span := p.Window + p.Margin
	if pa.ETA == nil || pb.ETA == nil || pb.RowsAhead != 8 || pa.RowsAhead != 0 {
		t.Fatalf("estimates: a %v (ahead %d), b %v (ahead %d); want both, with a's 8 rows ahead of b", pa.ETA, pa.RowsAhead, pb.ETA, pb.RowsAhead)
	}
	near := func(got time.Time, want time.Time, tol time.Duration) bool {
		d := got.Sub(want)
		return d <= tol && d >= -tol
	}
	if !near(*pa.ETA, start.Add(span), 300*time.Millisecond) || !near(*pb.ETA, start.Add(2*span), 300*time.Millisecond) {
		t.Errorf("before any call: a in %s, b in %s; want %s and %s", pa.ETA.Sub(start), pb.ETA.Sub(start), span, 2*span)
	}

	// The "consumers": rows take their slots in the order they were
	// published (one seller's rows are read in order from one partition)
	// and each is recorded at its slot.
	finished := map[string]time.Time{}
	// A row's "call" lasts from its slot until its record lands: the
	// forecast cannot tell such a row from one still waiting and may place
	// it up to a span late (throttle.Forecast), which a loaded machine
	// stretches from microseconds to a second.
	type call struct{ from, to time.Time }
	var calls []call
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, up := range []Result{a, b} {
		for _, r := range up.Sheet.Rows {
			slot, err := th.Reserve(ctx, seller)
			if err != nil || !slot.Admitted {
				t.Fatalf("reserve: %+v, %v", slot, err)
			}
			due := time.Now().Add(slot.Wait)
			wg.Go(func() {
				time.Sleep(time.Until(due))
				if err := e.store.RecordRow(ctx, up.UploadID, uploadstatus.RowResult{Row: r.Number, State: uploadstatus.Registered}); err != nil {
					t.Error(err)
				}
				mu.Lock()
				now := time.Now()
				if now.After(finished[up.UploadID]) {
					finished[up.UploadID] = now
				}
				calls = append(calls, call{due, now})
				mu.Unlock()
			})
		}
	}
	// A reading happened somewhere between the call that asked for it and
	// its answer: a call was under way then if the two overlap.
	underWay := func(asked, at time.Time) bool {
		for _, c := range calls {
			if c.from.Before(at) && asked.Before(c.to) {
				return true
			}
		}
		return false
	}
	type reading struct {
		id        string
		asked, at time.Time
		eta       time.Time
	}
	var readings []reading
	for _, first := range []Progress{pa, pb} {
		readings = append(readings, reading{first.ID, start, start, *first.ETA})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(150 * time.Millisecond)
	defer tick.Stop()
poll:
	for {
		select {
		case <-done:
			break poll
		case <-tick.C:
		}
		for _, id := range []string{a.UploadID, b.UploadID} {
			asked := time.Now()
			pr, err := e.up.Progress(ctx, seller, id)
			if err != nil {
				t.Fatal(err)
			}
			if pr.ETA != nil {
				readings = append(readings, reading{id, asked, time.Now(), *pr.ETA})
			}
		}
	}
	worst := time.Duration(0)
	for _, r := range readings {
		off := r.eta.Sub(finished[r.id])
		if off < 0 {
			off = -off
		}
		worst = max(worst, off)
		// The estimate's bound is one window + 2 s; the slot arithmetic is
		// exact, so the tolerance is the scheduling of this test's
		// goroutines, plus a span while a call was under way.
		tol := 500 * time.Millisecond
		if underWay(r.asked, r.at) {
			tol += span
		}
		if off > tol {
			t.Errorf("estimate of upload %s read at +%s said +%s; it finished at +%s", r.id, r.at.Sub(start).Round(time.Millisecond),
				r.eta.Sub(start).Round(time.Millisecond), finished[r.id].Sub(start).Round(time.Millisecond))
		}
	}
	t.Logf("%d estimates, the worst %s from the real finish (a at +%s, b at +%s)", len(readings), worst.Round(time.Millisecond),
		finished[a.UploadID].Sub(start).Round(time.Millisecond), finished[b.UploadID].Sub(start).Round(time.Millisecond))
	if pr, _ := e.up.Progress(ctx, seller, b.UploadID); pr.ETA != nil || pr.RowsWaiting != 0 {
		t.Errorf("a finished upload has an estimate %v and %d rows waiting", pr.ETA, pr.RowsWaiting)
	}
}

// TestListIsTheSellersOwnNewestFirst: pages of the seller's uploads, newest
// first, another seller's never among them, and a cursor from elsewhere refused.
func TestListIsTheSellersOwnNewestFirst(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil, WriterOptions{})
	var ids []string
	for i := range 5 {
		res, err := e.up.Upload(ctx, Request{SellerID: "lister", FileName: itoa(i) + ".xlsx", Data: xlsx(t, "list-"+itoa(i), validRows(1)...)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.UploadID)
	}
	if _, err := e.up.Upload(ctx, Request{SellerID: "other", Data: xlsx(t, "list-other", validRows(1)...)}); err != nil {
		t.Fatal(err)
	}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		p, err := e.up.List(ctx, "lister", cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range p.Uploads {
			got = append(got, u.ID)
		}
		if p.Next == "" {
			if pages != 2 {
				t.Errorf("%d pages of 2 for 5 uploads, want 3", pages+1)
			}
			break
		}
		cursor = p.Next
	}
	want := []string{ids[4], ids[3], ids[2], ids[1], ids[0]}
	if len(got) != len(want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("listed %v, want newest first %v", got, want)
		}
	}
	if _, err := e.up.List(ctx, "lister", "not-a-cursor", 2); err == nil {
		t.Error("a made-up cursor was accepted")
	}
	if _, err := e.up.Status(ctx, "other", ids[0]); err == nil {
		t.Error("another seller read the upload's status")
	}
}
