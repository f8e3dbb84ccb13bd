package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Counts and rates that must be at least 1 are refused below it, naming
// the flag, its variable and the unit where it has one.
func TestCountsOfAtLeastOne(t *testing.T) {
	secret := []string{"--jwt-secret", "0123456789abcdef0123456789abcdef"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"upload", "--seller", "s", "--publish-attempts", "0", "a.xlsx"}, "--publish-attempts (BULKREG_PUBLISH_ATTEMPTS): must be at least 1, got 0"},
		{append(secret, "--max-uploads", "0"), "--max-uploads (BULKREG_MAX_UPLOADS): must be at least 1, got 0"},
		{append(secret, "--max-uploads-per-seller", "-1"), "--max-uploads-per-seller (BULKREG_MAX_UPLOADS_PER_SELLER): must be at least 1, got -1"},
		{append(secret, "--min-upload-rate", "0"), "--min-upload-rate (BULKREG_MIN_UPLOAD_RATE): must be at least 1 byte per second, got 0"},
		{append(secret, "--max-reports", "0"), "--max-reports (BULKREG_MAX_REPORTS): must be at least 1, got 0"},
		{append(secret, "--max-reports-per-seller", "0"), "--max-reports-per-seller (BULKREG_MAX_REPORTS_PER_SELLER): must be at least 1, got 0"},
		{append(secret, "--min-download-rate", "0"), "--min-download-rate (BULKREG_MIN_DOWNLOAD_RATE): must be at least 1 byte per second, got 0"},
	} {
		args := tc.args
		if args[0] != "upload" {
			args = append([]string{"serve"}, args...)
		}
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, noEnv, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("producer %q: exit %d, stderr %q; want exit 2 saying %q", args, code, errb.String(), tc.want)
		}
	}
}
