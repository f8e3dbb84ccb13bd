package excel

import (
	"bytes"
	"context"
	"encoding/binary"
	"runtime"
	"strings"
	"testing"
)

// craftedDirectory is a zip whose central directory holds n headers of
// nameLen-byte names, after one empty local header, and whose end record
// declares `declared` entries (archive/zip compares the count only modulo
// 65,536 and reads headers until one is not).
func craftedDirectory(n, nameLen int, declared uint16) []byte {
	var b bytes.Buffer
	b.WriteString("PK\x03\x04")
	b.Write(make([]byte, 26))
	start := b.Len()
	h := make([]byte, zipDirHeaderLen)
	copy(h, zipDirHeaderSig)
	binary.LittleEndian.PutUint16(h[28:], uint16(nameLen))
	name := bytes.Repeat([]byte("a"), nameLen)
	for range n {
		b.Write(h)
		b.Write(name)
	}
	size := b.Len() - start
	end := make([]byte, zipDirEndLen)
	copy(end, zipDirEndSig)
	binary.LittleEndian.PutUint16(end[8:], declared)
	binary.LittleEndian.PutUint16(end[10:], declared)
	binary.LittleEndian.PutUint32(end[12:], uint32(size))
	binary.LittleEndian.PutUint32(end[16:], uint32(start))
	b.Write(end)
	return b.Bytes()
}

// allocatedBy is the bytes allocated while f runs (a figure the load of the
// machine does not change).
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A zip directory too large is refused before archive/zip reads it:
// whatever its end record claims, opening the file allocates a bounded
// amount (archive/zip keeps every header it reads: 196,613 headers cost it
// about 50 MiB, 150 names of 64 KiB about 19 MiB).
func TestZipDirectoryMeasuredBeforeItIsRead(t *testing.T) {
	const bound = 1 << 20
	for _, tc := range []struct {
		name string
		data []byte
		msg  string
	}{
		// 196,613 = 3 × 65,536 + 5.
		{"196,613 headers, 5 declared", craftedDirectory(196_613, 0, 5), "holds more than 10,000 parts"},
		{"10,001 headers, 10,001 declared", craftedDirectory(10_001, 0, 10_001), "holds 10,001 parts"},
		{"150 headers of 64 KiB names", craftedDirectory(150, 65535, 150), "zip directory holds more than 2 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.data) > DefaultMaxFileSize {
				t.Fatalf("the file is %d bytes, over the upload limit", len(tc.data))
			}
			p := NewParser(Options{})
			var err error
			alloc := allocatedBy(func() { _, err = p.ParseBytes(context.Background(), tc.data) })
			fe := fileErrCode(t, err)
			if fe.Code != CodeTooLarge || !strings.Contains(fe.Message, tc.msg) {
				t.Errorf("%s: %s, want %s: …%s…", fe.Code, fe.Message, CodeTooLarge, tc.msg)
			}
			if alloc > bound {
				t.Errorf("refusing it allocated %d KiB, want at most %d KiB", alloc>>10, bound>>10)
			}
			t.Logf("%d bytes: %s in %d KiB allocated", len(tc.data), fe.Code, alloc>>10)
		})
	}
}

// The measure agrees with archive/zip on real files: every fixture's
// directory is read whole, with its true count and size.
func TestZipDirectoryOfRealFiles(t *testing.T) {
	for _, name := range []string{"valid-500.xlsx", "korean-headers.xlsx", "merged-cells.xlsx"} {
		data := fixture(t, name)
		d, ok := readZipDirectory(data)
		if !ok || d.entries != d.declaredEntries || d.bytes != d.declaredBytes || d.entries == 0 {
			t.Errorf("%s: %+v, %v", name, d, ok)
		}
	}
	for _, name := range []string{"zip-9999-entries.xlsx"} {
		d, ok := readZipDirectory(hostileFile(t, name))
		if !ok || d.entries != 9999 || d.declaredEntries != 9999 || d.bytes > maxDirectoryBytes {
			t.Errorf("%s: %+v, %v", name, d, ok)
		}
	}
}
