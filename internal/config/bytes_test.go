package config

import (
	"flag"
	"strings"
	"testing"
)

// A size reads as a whole number of bytes or with a binary or decimal unit;
// anything else is refused naming the variable, and -h prints the default
// in the largest whole binary unit.
func TestBytesSetting(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  bool
	}{
		{"268435456", 256 << 20, false},
		{"256MiB", 256 << 20, false},
		{" 8 MiB ", 8 << 20, false},
		{"300MB", 300e6, false},
		{"2GiB", 2 << 30, false},
		{"64kB", 64e3, false},
		{"0", 0, false},
		{"12B", 12, false},
		{"-1", 0, true},
		{"1.5GiB", 0, true},
		{"lots", 0, true},
		{"9999999999GiB", 0, true},
	} {
		got, err := ParseBytes(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	n := int64(256 << 20)
	b := NewBinder(fs, func(k string) string { return map[string]string{"BULKREG_SHARE": "lots"}[k] })
	b.Bytes(&n, "share", "a share")
	if err := b.Err(); err == nil || !strings.Contains(err.Error(), "BULKREG_SHARE") {
		t.Errorf("a malformed variable: %v, want an error naming BULKREG_SHARE", err)
	}
	if d := fs.Lookup("share").DefValue; d != "256MiB" {
		t.Errorf("default shown as %q, want 256MiB", d)
	}
	if err := fs.Parse([]string{"--share", "1GiB"}); err != nil || n != 1<<30 {
		t.Errorf("--share 1GiB: %d, %v", n, err)
	}
}
