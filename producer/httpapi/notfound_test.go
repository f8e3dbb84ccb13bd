package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// redisWork records the commands a client sends (name and first key) and
// the bytes of their replies.
type redisWork struct {
	mu    sync.Mutex
	cmds  []string
	bytes int
}

func (w *redisWork) DialHook(next redis.DialHook) redis.DialHook { return next }

func (w *redisWork) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		w.note(cmd)
		return err
	}
}

func (w *redisWork) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			w.note(c)
		}
		return err
	}
}

func (w *redisWork) note(cmd redis.Cmder) {
	name := cmd.Name()
	if args := cmd.Args(); len(args) > 1 {
		// The key's kind (meta, rows, cells), not the upload's id.
		k, _ := args[1].(string)
		name += " " + k[strings.LastIndex(k, "}")+1:]
	}
	n := 0
	switch c := cmd.(type) {
	case *redis.MapStringStringCmd:
		for k, v := range c.Val() {
			n += len(k) + len(v)
		}
	case *redis.StringCmd:
		n = len(c.Val())
	case *redis.StringSliceCmd:
		for _, v := range c.Val() {
			n += len(v)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cmds = append(w.cmds, name)
	w.bytes += n
}

func (w *redisWork) take() ([]string, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	cmds, n := w.cmds, w.bytes
	w.cmds, w.bytes = nil, 0
	sort.Strings(cmds)
	return cmds, n
}

// TestAnotherSellersUploadIsNotFoundAsCheaplyAsAMadeUpOne: a 404 for
// another seller's existing upload costs what one for a made-up id costs,
// so its time does not tell that the upload exists (reading the upload and
// its rows before comparing the owner makes it about 5× as slow). The
// owner is checked first, reading the upload's fields alone: on every route that names an upload, both 404s send the
// same commands, neither reads the rows or the cells, and their replies
// differ by the upload's fields only (not its 500 rows).
func TestAnotherSellersUploadIsNotFoundAsCheaplyAsAMadeUpOne(t *testing.T) {
	h, _ := limitedServer(t, &Server{})
	rdb := testredis.Start(t).Client()
	work := &redisWork{}
	rdb.AddHook(work)
	store := uploadstatus.New(rdb, time.Hour)
	h.up.Statuses, h.up.Index = store, store
	ct, body := multipartBody(t, "file", xlsx(t, "owner", validRows(500)...), nil)
	resp, b := h.do(t, "POST", "/v1/uploads", token(t, "seller-a"), ct, body)
	var up UploadResponse
	if err := json.Unmarshal(b, &up); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("A's upload: %d %.300s", resp.StatusCode, b)
	}
	rows := make([]uploadstatus.RowResult, 500)
	for i := range rows {
		rows[i] = uploadstatus.RowResult{Row: i + 2, State: uploadstatus.Failed, Code: "invalid", Reason: strings.Repeat("a reason the API gave ", 10)}
	}
	if err := store.RecordRows(context.Background(), up.UploadID, rows); err != nil {
		t.Fatal(err)
	}
	tokB := token(t, "seller-b")
	for _, route := range []string{"/v1/uploads/%s", "/v1/uploads/%s/events", "/v1/uploads/%s/report.xlsx"} {
		var cmds [2][]string
		var bytes [2]int
		var took [2][]time.Duration
		for i, id := range []string{up.UploadID, "0123456789abcdef"} {
			path := strings.Replace(route, "%s", id, 1)
			for range 9 {
				work.take()
				start := time.Now()
				resp, b := h.do(t, "GET", path, tokB, "", nil)
				took[i] = append(took[i], time.Since(start))
				if resp.StatusCode != http.StatusNotFound {
					t.Fatalf("B asks for %s: %d %.200s, want 404", path, resp.StatusCode, b)
				}
				cmds[i], bytes[i] = work.take()
			}
			slices.Sort(took[i])
		}
		t.Logf("%s: another seller's upload %v, %d reply bytes, median %s; a made-up id %v, %d bytes, median %s",
			route, cmds[0], bytes[0], took[0][4], cmds[1], bytes[1], took[1][4])
		if !slices.Equal(cmds[0], cmds[1]) {
			t.Errorf("%s: another seller's upload sends %v, a made-up id %v; want the same commands", route, cmds[0], cmds[1])
		}
		for _, c := range cmds[0] {
			if strings.HasSuffix(c, ":rows") || strings.HasSuffix(c, ":cells") {
				t.Errorf("%s: a 404 for another seller's upload reads %s", route, c)
			}
		}
		if bytes[0]-bytes[1] > 1<<10 {
			t.Errorf("%s: another seller's upload reads %d bytes from Redis, a made-up id %d; want them within the upload's fields (1 KiB)", route, bytes[0], bytes[1])
		}
	}
}
