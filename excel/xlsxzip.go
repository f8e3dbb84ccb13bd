// The zip's directory, measured before archive/zip reads it.

package excel

import (
	"bytes"
	"encoding/binary"
)

// maxDirectoryBytes caps the zip's central directory, in bytes. An entry
// of an Excel workbook takes 60 to 130 bytes there (46 fixed, its name, an
// extra field or two), so 10,000 parts of long names fit well under it.
// archive/zip keeps every entry's name, extra field and comment, about 330
// bytes besides them, so the two caps bound what opening the zip costs to a
// few MiB whatever the file claims.
const maxDirectoryBytes = 2 << 20

// zipDirectory is what the end of a zip says about its directory, and what
// walking the directory's headers found, without keeping any of them.
type zipDirectory struct {
	declaredEntries uint64 // the end record's count (the Zip64 record's when there is one)
	declaredBytes   uint64 // the end record's directory size
	// entries and bytes are what archive/zip would read: the headers one
	// after another from the directory's start, as long as each is whole
	// and starts with its signature (archive/zip reads on past the declared
	// count, which it compares only modulo 65,536). Counting stops past
	// maxParts entries or maxDirectoryBytes bytes.
	entries, bytes uint64
}

// Signatures and fixed lengths of the zip format (APPNOTE.TXT 4.3).
const (
	zipDirEndLen      = 22
	zipDir64LocLen    = 20
	zipDir64EndLen    = 56
	zipDirHeaderLen   = 46
	zipDirEndSig      = "PK\x05\x06"
	zipDir64LocSig    = "PK\x06\x07"
	zipDir64EndSig    = "PK\x06\x06"
	zipDirHeaderSig   = "PK\x01\x02"
	zipDirEndSearch1  = 1024
	zipDirEndSearch2  = 65 * 1024
	zipDirEndCommentA = zipDirEndLen - 2 // offset of the comment length in the end record
)

// readZipDirectory finds the directory the way archive/zip does (the end
// record in the last 1 KiB, else the last 65 KiB; the Zip64 end record
// through its locator; the same base offset) and walks its headers. ok is
// false when archive/zip would find no directory either (it then says why).
// Where archive/zip's start is in doubt (it prefers offset 0 when a header
// is there), both starts are walked and the larger figures kept, so the
// figures bound what archive/zip reads.
func readZipDirectory(data []byte) (d zipDirectory, ok bool) {
	size := int64(len(data))
	var end int64 = -1
	for _, n := range [...]int64{zipDirEndSearch1, zipDirEndSearch2} {
		n = min(n, size)
		block := data[size-n:]
		if p := findDirEnd(block); p >= 0 {
			end = size - n + int64(p)
			break
		}
		if n == size {
			break
		}
	}
	if end < 0 {
		return d, false
	}
	rec := data[end:]
	d.declaredEntries = uint64(binary.LittleEndian.Uint16(rec[10:]))
	d.declaredBytes = uint64(binary.LittleEndian.Uint32(rec[12:]))
	offset := uint64(binary.LittleEndian.Uint32(rec[16:]))
	if d.declaredEntries == 0xFFFF || d.declaredBytes == 0xFFFF || offset == 0xFFFFFFFF {
		if p, found := findDir64End(data, end); found {
			if p < 0 || p+zipDir64EndLen > size || !bytes.HasPrefix(data[p:], []byte(zipDir64EndSig)) {
				return d, false
			}
			end = p
			d.declaredEntries = binary.LittleEndian.Uint64(data[p+32:])
			d.declaredBytes = binary.LittleEndian.Uint64(data[p+40:])
			offset = binary.LittleEndian.Uint64(data[p+48:])
		}
	}
	const maxInt64 = 1<<63 - 1
	if d.declaredBytes > maxInt64 || offset > maxInt64 {
		return d, false
	}
	base := end - int64(d.declaredBytes) - int64(offset)
	if o := base + int64(offset); o < 0 || o >= size {
		return d, false
	}
	d.entries, d.bytes = walkDirHeaders(data, base+int64(offset))
	if base > 0 && int64(offset) < size {
		if n, b := walkDirHeaders(data, int64(offset)); n > 0 {
			d.entries, d.bytes = max(d.entries, n), max(d.bytes, b)
		}
	}
	return d, true
}

// findDirEnd is archive/zip's search for the end record in a block: the
// last signature whose comment fits in the block.
func findDirEnd(b []byte) int {
	for i := len(b) - zipDirEndLen; i >= 0; i-- {
		if b[i] == 'P' && b[i+1] == 'K' && b[i+2] == 0x05 && b[i+3] == 0x06 {
			n := int(binary.LittleEndian.Uint16(b[i+zipDirEndCommentA:]))
			if n+zipDirEndLen+i > len(b) {
				return -1
			}
			return i
		}
	}
	return -1
}

// findDir64End reads the Zip64 locator just before the end record at end:
// found is false when there is none (or it is not one archive/zip uses:
// archive/zip takes the offset as an int64, so one of 2^63 or more reads as
// negative and it goes on with the 32-bit end record, as this does). p is
// -1 when the offset is past any file this reader is given: archive/zip
// fails reading the Zip64 end record there.
func findDir64End(data []byte, end int64) (p int64, found bool) {
	loc := end - zipDir64LocLen
	if loc < 0 || !bytes.HasPrefix(data[loc:], []byte(zipDir64LocSig)) {
		return 0, false
	}
	if binary.LittleEndian.Uint32(data[loc+4:]) != 0 || binary.LittleEndian.Uint32(data[loc+16:]) != 1 {
		return 0, false
	}
	off := binary.LittleEndian.Uint64(data[loc+8:])
	if off >= 1<<63 {
		return 0, false
	}
	if off > uint64(len(data)) {
		return -1, true
	}
	return int64(off), true
}

// walkDirHeaders counts the whole directory headers from start, stopping
// past maxParts headers or maxDirectoryBytes bytes: no more is needed to
// refuse the file, and the walk stays cheap whatever the file holds.
func walkDirHeaders(data []byte, start int64) (entries, n uint64) {
	i := start
	for i >= 0 && i+zipDirHeaderLen <= int64(len(data)) && entries <= maxParts && n <= maxDirectoryBytes {
		h := data[i:]
		if !bytes.HasPrefix(h, []byte(zipDirHeaderSig)) {
			break
		}
		l := int64(zipDirHeaderLen) + int64(binary.LittleEndian.Uint16(h[28:])) + int64(binary.LittleEndian.Uint16(h[30:])) + int64(binary.LittleEndian.Uint16(h[32:]))
		if i+l > int64(len(data)) {
			break
		}
		entries++
		n += uint64(l)
		i += l
	}
	return entries, n
}
