package redisproc

import (
	"context"
	"os/exec"
	"strings"
	"testing"
)

// TestAServerOnTheSamePortIsNotTakenForThisOne: a port another server
// already holds (as when another test's server binds a port FreePort gave
// out first) is refused, though that server answers there; a free one is
// this process's own.
func TestAServerOnTheSamePortIsNotTakenForThisOne(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server is not installed; `make deps` installs it")
	}
	ctx := context.Background()
	first, err := Start(ctx, t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(first.Stop)
	second, err := Start(ctx, t.TempDir(), first.Port)
	if err == nil {
		second.Stop()
		t.Fatalf("a second server on port %d (held by the first) started, want an error", first.Port)
	}
	if !strings.Contains(err.Error(), "another server answers there") && !strings.Contains(err.Error(), "exited") {
		t.Errorf("the second server's error: %v; want that another server answers or that it exited", err)
	}
	third, err := Start(ctx, t.TempDir(), 0)
	if err != nil || third.Port == first.Port {
		t.Fatalf("a server on a free port: %+v, %v", third, err)
	}
	third.Stop()
}

func TestProcessID(t *testing.T) {
	for _, c := range []struct {
		info string
		want int
	}{
		{"# Server\r\nredis_version:7.0.15\r\nprocess_id:4242\r\nrun_id:abc\r\n", 4242},
		{"process_id:7", 7},
		{"# Server\r\nredis_version:7.0.15\r\n", 0},
		{"process_id:x\r\n", 0},
	} {
		if got := processID(c.info); got != c.want {
			t.Errorf("processID(%q) = %d, want %d", c.info, got, c.want)
		}
	}
}
