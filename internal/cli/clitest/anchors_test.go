package clitest

import (
	"maps"
	"slices"
	"testing"
)

// HeadingSlug gives the anchors GitHub's slugger gives: punctuation and
// symbols dropped, letters of any script and digits kept, each space a
// hyphen.
func TestHeadingSlug(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"Alerts and runbooks", "alerts-and-runbooks"},
		{"`BulkregRateLimited`", "bulkregratelimited"},
		{"Why kafka-go's `ConsumerGroup`/`Generation` and not `kafka.Reader`", "why-kafka-gos-consumergroupgeneration-and-not-kafkareader"},
		{"보안 정책 / Security policy", "보안-정책--security-policy"},
		{"The SKU ledger: one product per `seller_sku`", "the-sku-ledger-one-product-per-seller_sku"},
		{"Upgrades — and “rolling” deploys…", "upgrades--and-rolling-deploys"},
		{"1.0 – 2.0 (what’s new)", "10--20-whats-new"},
		{"  Trailing spaces  ", "trailing-spaces"},
	} {
		if got := HeadingSlug(c.heading); got != c.want {
			t.Errorf("HeadingSlug(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
}

// Anchors reads every heading level, not a heading inside fenced code nor
// a line that only starts with #, and numbers repeated headings.
func TestAnchors(t *testing.T) {
	page := "# Title\n\nText #not-a-heading\n#hashtag\n## Setup\n\n```sh\n# a comment in code\n```\n" +
		"### Setup\n~~~\n## In tildes\n~~~\n#### Setup ##\n###### Six\n####### Seven\n## Setup\r\n"
	got := slices.Sorted(maps.Keys(Anchors(page)))
	want := []string{"setup", "setup-1", "setup-2", "setup-3", "six", "title"}
	if !slices.Equal(got, want) {
		t.Errorf("Anchors = %q, want %q", got, want)
	}
}
