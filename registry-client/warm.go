package registryclient

import (
	"context"
	"io"
	"net/http"
	"sync"
)

// Warm sends n requests at once that register nothing (GET of the base
// URL), so that n connections to the API are open and idle for the calls
// that follow, and answers how many got an answer. Whatever the status, an
// answer means a connection that the next call reuses: a call that must
// connect first reaches the API later than its slot by the connect time (a
// lost SYN costs a second), and a server or proxy closes connections left
// idle between two windows. Only 201s count against a seller's limit.
//
// Each request keeps its connection (its body unread) until every request
// has its answer or ctx ends. Otherwise a request that answered fast gives
// its connection back before the last one starts, the last one reuses it
// (the pool hands out the most recently used connection first), and the
// connections that went unused are the ones the server closes as idle.
func (c *Client) Warm(ctx context.Context, n int) int {
	var wg, answers sync.WaitGroup
	var mu sync.Mutex
	answered := 0
	all := make(chan struct{})
	answers.Add(n)
	for range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, c.timeout)
			defer cancel()
			resp, err := c.warmRequest(ctx)
			answers.Done()
			if err != nil {
				return
			}
			defer resp.Body.Close()
			mu.Lock()
			answered++
			mu.Unlock()
			select {
			case <-all:
			case <-ctx.Done():
			}
			// Read to the end so the connection goes back to the pool.
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
		})
	}
	answers.Wait()
	close(all)
	wg.Wait()
	return answered
}

func (c *Client) warmRequest(ctx context.Context) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base.String()+"/", nil)
	if err != nil {
		return nil, err
	}
	for _, f := range c.auth {
		req.Header.Set(f.name, f.value)
	}
	return c.http.Do(req)
}
