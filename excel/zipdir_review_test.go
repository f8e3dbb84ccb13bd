package excel

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"
)

// A Zip64 locator whose offset is 2^63 or more is taken by archive/zip as
// "not Zip64" (int64(p) < 0) and it goes on with the 32-bit end record;
// readZipDirectory answers ok=false for it, so the directory is read whole
// unmeasured.
func TestReviewZipDirectoryZip64LocatorPastInt64(t *testing.T) {
	data := craftedDirectory(196_607, 0, 0xFFFF) // 3 × 65,536 − 1: archive/zip's modulo check passes
	end := data[len(data)-zipDirEndLen:]
	loc := make([]byte, zipDir64LocLen)
	copy(loc, zipDir64LocSig)
	binary.LittleEndian.PutUint64(loc[8:], 1<<63)
	binary.LittleEndian.PutUint32(loc[16:], 1)
	var b bytes.Buffer
	b.Write(data[:len(data)-zipDirEndLen])
	b.Write(loc)
	b.Write(end)
	data = b.Bytes()
	if len(data) > DefaultMaxFileSize {
		t.Fatalf("file %d bytes, over the upload limit", len(data))
	}
	p := NewParser(Options{})
	var err error
	alloc := allocatedBy(func() { _, err = p.ParseBytes(context.Background(), data) })
	t.Logf("err: %v", err)
	if alloc > 1<<20 {
		t.Errorf("opening the file allocated %d KiB before it was refused, want at most 1024 KiB (directory measured before archive/zip reads it)", alloc>>10)
	}
}
