package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/testredis"
)

// countingSessions counts the session reads of a store.
type countingSessions struct {
	SessionStore
	gets atomic.Int64
}

func (c *countingSessions) Get(ctx context.Context, id string) (Session, error) {
	c.gets.Add(1)
	return c.SessionStore.Get(ctx, id)
}

// TestAStreamReadsItsSessionAtABoundedCadence: a page's progress stream
// asks the store for its session once per sessionRecheck, not at every
// tick of its events, and still ends, saying so, within sessionRecheck of
// the session's end.
func TestAStreamReadsItsSessionAtABoundedCadence(t *testing.T) {
	h := newHTTPEnv(t)
	store := &countingSessions{SessionStore: NewRedisSessions(testredis.Start(t).Client())}
	s := &Server{Uploader: h.up, Auth: Auth{Secret: secret}, Sessions: store, EventsInterval: 50 * time.Millisecond}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	ct, body := multipartBody(t, "file", xlsx(t, "cadence", validRows(2)...), nil)
	_, b := h.do(t, "POST", "/v1/uploads", token(t, "seller-a"), ct, body)
	var up UploadResponse
	if err := json.Unmarshal(b, &up); err != nil || up.UploadID == "" {
		t.Fatalf("upload: %s", b)
	}
	id, _, err := store.Create(t.Context(), "seller-a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/v1/uploads/"+up.UploadID+"/events", nil)
	req.AddCookie(&http.Cookie{Name: cookiePlain, Value: id})
	before := store.gets.Load()
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the stream with a session: %v %v", resp, err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 256)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	const open = 1500 * time.Millisecond // 30 ticks, less than sessionRecheck
	time.Sleep(open)
	if n := store.gets.Load() - before; n > 2 {
		t.Errorf("a stream open %v with a tick of %v read its session %d times; want at most 2 (signing in, then once per %v)", open, s.EventsInterval, n, sessionRecheck)
	}

	if err := store.Delete(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	ended := time.Now()
	var said []string
	deadline := time.After(sessionRecheck + 2*time.Second)
	for open := true; open; {
		select {
		case l, ok := <-lines:
			open = ok
			said = append(said, l)
		case <-deadline:
			t.Fatalf("the stream is open %v after its session ended; it said %q", sessionRecheck+2*time.Second, said)
		}
	}
	if !strings.Contains(strings.Join(said, "\n"), "event: signedout") {
		t.Errorf("the stream ended without saying the session ended: %q", said)
	}
	t.Logf("the stream ended %v after its session", time.Since(ended).Round(time.Millisecond))
}
