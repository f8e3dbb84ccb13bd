// Package hostile reads the hostile corpus (testdata/hostile, written by go
// run ./testdata/hostile/gen) and measures what one upload of it costs the
// process: the one reading and measuring that excel's and producer/upload's
// hostile tests and go run ./bench/hostile share.
package hostile

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Names lists the uploads of the corpus in dir, by name (NAME for a stored
// NAME.gz), sorted; INDEX.tsv and the generator are not uploads.
func Names(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read the hostile corpus (go run ./testdata/hostile/gen writes it): %w", err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && e.Name() != "INDEX.tsv" {
			names = append(names, strings.TrimSuffix(e.Name(), ".gz"))
		}
	}
	slices.Sort(names)
	return names, nil
}

// Load reads the upload name of the corpus in dir as it is uploaded: an
// upload larger than 256 KiB is stored as NAME.gz, compressed.
func Load(dir, name string) ([]byte, error) {
	path := filepath.Join(dir, name)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		path += ".gz"
		if data, err = os.ReadFile(path); err == nil {
			var zr *gzip.Reader
			if zr, err = gzip.NewReader(bytes.NewReader(data)); err == nil {
				data, err = io.ReadAll(zr)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("read %s of the hostile corpus (go run ./testdata/hostile/gen writes it): %w", path, err)
	}
	return data, nil
}

// CPU is the user and system CPU time the process has used (getrusage).
func CPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// MaxRSS is the process's peak resident set size so far, in bytes.
func MaxRSS() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Maxrss << 10 // KiB on Linux
}

// RSS is the process's resident set size now, in bytes (0 when unknown).
func RSS() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.ParseInt(f[1], 10, 64)
	return n * int64(os.Getpagesize())
}

// PeakRSS samples the process's RSS every millisecond while f runs and
// returns its growth over the RSS before f (after a collection): what f
// costs where the process has already reached a higher peak, so that MaxRSS
// cannot tell.
func PeakRSS(f func()) int64 {
	runtime.GC()
	debug.FreeOSMemory()
	base := RSS()
	var peak atomic.Int64
	peak.Store(base)
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if r := RSS(); r > peak.Load() {
				peak.Store(r)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	if r := RSS(); r > peak.Load() {
		peak.Store(r)
	}
	close(done)
	<-sampled
	return peak.Load() - base
}
