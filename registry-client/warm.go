package registryclient

import (
	"context"
	"io"
	"net/http"
	"sync"
)

// Warm sends n requests at once that register nothing (HEAD of the base
// URL), so that about n connections to the API are open and idle for the
// calls that follow, and answers how many got an answer. Whatever the
// status, an answer means a connection that the next call reuses: a call
// that must connect first reaches the API later than its slot by the
// connect time (a lost SYN costs a second), and a server or proxy closes
// connections left idle between two windows. Only 201s count against a
// seller's limit.
func (c *Client) Warm(ctx context.Context, n int) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	answered := 0
	for range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, c.timeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodHead, c.base.String()+"/", nil)
			if err != nil {
				return
			}
			if c.authName != "" {
				req.Header.Set(c.authName, c.authValue)
			}
			resp, err := c.http.Do(req)
			if err != nil {
				return
			}
			// Read to the end so the connection goes back to the pool.
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
			resp.Body.Close()
			mu.Lock()
			answered++
			mu.Unlock()
		})
	}
	wg.Wait()
	return answered
}
