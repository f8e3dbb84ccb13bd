package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// delete-upload gives a seller refused for their share room at once: it
// deletes the named uploads of that seller (keys, history, share), refuses
// another seller's upload without touching it, and the seller's next
// upload then fits.
func TestDeleteUploadCommand(t *testing.T) {
	rs := testredis.Start(t)
	env := map[string]string{"BULKREG_REDIS_ADDRS": rs.Addr}
	ctx := context.Background()
	rdb := rs.Client()
	store := uploadstatus.New(rdb, time.Hour, uploadstatus.WithShare(uploadstatus.Share{Uploads: 2}))
	created := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for _, u := range []struct{ id, seller string }{{"a1", "seller-a"}, {"a2", "seller-a"}, {"b1", "seller-b"}} {
		if _, err := store.Create(ctx, uploadstatus.Upload{ID: u.id, SellerID: u.seller, Total: 3, Valid: 3, CreatedAt: created,
			Cells: map[int][]string{2: {"x"}, 3: {"y"}, 4: {"z"}}}); err != nil {
			t.Fatal(err)
		}
		if err := store.AddToSeller(ctx, u.seller, u.id, created); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.Create(ctx, uploadstatus.Upload{ID: "a3", SellerID: "seller-a", Total: 1}); !errors.Is(err, uploadstatus.ErrShareFull) {
		t.Fatalf("a third upload of seller-a: %v, want the share full", err)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"delete-upload", "a1"}, "--seller is required"},
		{[]string{"delete-upload", "--seller", "seller-a"}, "want one or more upload IDs, got none"},
	} {
		if r := runCLI(env, tc.args...); r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: %+v, want exit 2 saying %q", tc.args, r, tc.want)
		}
	}

	r := runCLI(env, "delete-upload", "--seller", "seller-a", "a1", "b1", "a2")
	if r.code != exitFailed || !strings.Contains(r.stdout, "deleted a1\n") || !strings.Contains(r.stdout, "deleted a2\n") ||
		strings.Contains(r.stdout, "deleted b1") || !strings.Contains(r.stderr, `no upload "b1" of seller "seller-a"`) ||
		!strings.Contains(r.stdout, `seller "seller-a" keeps 0 uploads`) {
		t.Fatalf("delete-upload of two uploads of seller-a and one of seller-b: %+v; want a1 and a2 deleted, b1 refused, exit 1", r)
	}
	for _, id := range []string{"a1", "a2"} {
		if n, _ := rdb.Exists(ctx, uploadstatus.MetaKey(id), "bulkreg:upload:{"+id+"}:cells").Result(); n != 0 {
			t.Errorf("%s: %d keys left", id, n)
		}
	}
	if ids, _ := store.SellerUploads(ctx, "seller-a", time.Time{}, 10); len(ids) != 0 {
		t.Errorf("seller-a still lists %v", ids)
	}
	if st, err := store.Get(ctx, "b1"); err != nil || st.SellerID != "seller-b" {
		t.Errorf("seller-b's upload after another seller's delete: %+v, %v", st, err)
	}
	if u, _ := store.Usage(ctx, "seller-a"); u.Uploads != 0 || u.Bytes > 1024 {
		t.Errorf("seller-a's share after the delete: %+v, want no upload and only the tombstones", u)
	}
	if _, err := store.Create(ctx, uploadstatus.Upload{ID: "a3", SellerID: "seller-a", Total: 1}); err != nil {
		t.Errorf("seller-a's next upload after the delete: %v", err)
	}
	if r := runCLI(env, "delete-upload", "--seller", "seller-b", "b1"); r.code != exitOK || !strings.HasPrefix(r.stdout, "deleted b1\nseller \"seller-b\" keeps 0 uploads, ") {
		t.Errorf("delete-upload of seller-b's own upload: %+v", r)
	}
}
