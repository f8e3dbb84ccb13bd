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

// zip64Located is a crafted directory of n headers whose end record says
// 0xFFFF entries, with a Zip64 locator before it pointing at offset.
func zip64Located(n int, offset uint64) []byte {
	data := craftedDirectory(n, 0, 0xFFFF)
	end := data[len(data)-zipDirEndLen:]
	loc := make([]byte, zipDir64LocLen)
	copy(loc, zipDir64LocSig)
	binary.LittleEndian.PutUint64(loc[8:], offset)
	binary.LittleEndian.PutUint32(loc[16:], 1)
	var b bytes.Buffer
	b.Write(data[:len(data)-zipDirEndLen])
	b.Write(loc)
	b.Write(end)
	return b.Bytes()
}

// A Zip64 locator whose offset is 2^63 or more is taken by archive/zip as
// "not Zip64" (int64(p) < 0) and it goes on with the 32-bit end record: the
// directory is measured from that record as well, and refused by its
// count before archive/zip reads it. A locator pointing past the file, where
// archive/zip finds no directory, refuses the file as damaged without
// archive/zip reading anything either.
func TestZipDirectoryZip64Locator(t *testing.T) {
	const bound = 1 << 20
	for _, tc := range []struct {
		name   string
		offset uint64
		code   string
		msg    string
	}{
		// 3 × 65,536 − 1 headers: archive/zip's modulo check passes.
		{"offset 2^63", 1 << 63, CodeTooLarge, "holds 65,535 parts"},
		{"offset 2^64 - 1", 1<<64 - 1, CodeTooLarge, "holds 65,535 parts"},
		{"offset 2^62 + 1", 1<<62 + 1, CodeDamaged, "damaged"},
		{"offset past the file", 1 << 40, CodeDamaged, "damaged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := zip64Located(196_607, tc.offset)
			if len(data) > DefaultMaxFileSize {
				t.Fatalf("file %d bytes, over the upload limit", len(data))
			}
			p := NewParser(Options{})
			var err error
			alloc := allocatedBy(func() { _, err = p.ParseBytes(context.Background(), data) })
			fe := fileErrCode(t, err)
			if fe.Code != tc.code || !strings.Contains(fe.Message, tc.msg) {
				t.Errorf("%s: %s, want %s: …%s…", fe.Code, fe.Message, tc.code, tc.msg)
			}
			if alloc > bound {
				t.Errorf("opening the file allocated %d KiB before it was refused, want at most %d KiB (directory measured before archive/zip reads it)", alloc>>10, bound>>10)
			}
		})
	}
}
