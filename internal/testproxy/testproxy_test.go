package testproxy

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echo serves lines back until the test ends; it counts the lines it got.
func echo(t *testing.T) (addr string, got chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got = make(chan string, 100)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					got <- line
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), got
}

// TestLink: a delay makes a round trip two delays long; a blackhole holds
// a request until it ends, then delivers it; a request sent into the
// blackhole by a client that then hangs up never reaches the server.
func TestLink(t *testing.T) {
	target, got := echo(t)
	l, err := NewLink(t, target)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	roundTrip := func(line string) time.Duration {
		t.Helper()
		start := time.Now()
		if _, err := c.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
		if back, err := r.ReadString('\n'); err != nil || back != line {
			t.Fatalf("echo of %q = %q, %v", line, back, err)
		}
		<-got
		return time.Since(start)
	}
	if d := roundTrip("a\n"); d > 100*time.Millisecond {
		t.Errorf("round trip with no fault took %v", d)
	}
	l.SetDelay(150 * time.Millisecond)
	if d := roundTrip("b\n"); d < 300*time.Millisecond || d > 600*time.Millisecond {
		t.Errorf("round trip with a 150ms delay took %v, want about 300ms", d)
	}
	l.SetDelay(0)
	l.SetBlackhole(true)
	sent := l.Sent()
	if _, err := c.Write([]byte("c\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case line := <-got:
		t.Fatalf("the server got %q through the blackhole", line)
	case <-time.After(300 * time.Millisecond):
	}
	if l.Sent() != sent+1 {
		t.Errorf("Sent = %d, want %d: the held request counts", l.Sent(), sent+1)
	}
	l.SetBlackhole(false)
	if back, err := r.ReadString('\n'); err != nil || back != "c\n" || <-got != "c\n" {
		t.Errorf("after the blackhole: %q, %v; want the held request delivered and answered", back, err)
	}

	// A client that gives up inside the blackhole.
	c2, err := net.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	l.SetBlackhole(true)
	if _, err := c2.Write([]byte("lost\n")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	c2.Close()
	time.Sleep(50 * time.Millisecond)
	l.SetBlackhole(false)
	select {
	case line := <-got:
		t.Errorf("the server got %q from a client that hung up inside the blackhole", line)
	case <-time.After(300 * time.Millisecond):
	}
}
