package sellertime

import (
	"strings"
	"sync"
	"testing"
	"time"
)

func TestFormat(t *testing.T) {
	zone := func(name string) *time.Location {
		loc, err := Load(name)
		if err != nil {
			t.Fatal(err)
		}
		return loc
	}
	seoul, ny := zone("Asia/Seoul"), zone("America/New_York")
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		name   string
		at     string
		loc    *time.Location
		ko, en string
	}{
		{"afternoon in Seoul", "2026-12-01T06:04:05Z", seoul, "2026-12-01 오후 3:04:05 (KST)", "2026-12-01 3:04:05 PM (KST)"},
		{"the next day in Seoul, the day before in UTC", "2026-11-30T16:30:00.999Z", seoul, "2026-12-01 오전 1:30:00 (KST)", "2026-12-01 1:30:00 AM (KST)"},
		{"midnight", "2026-12-01T15:00:00Z", seoul, "2026-12-02 오전 12:00:00 (KST)", "2026-12-02 12:00:00 AM (KST)"},
		{"noon", "2026-12-01T03:00:00Z", seoul, "2026-12-01 오후 12:00:00 (KST)", "2026-12-01 12:00:00 PM (KST)"},
		{"New York in winter", "2026-01-15T20:00:07Z", ny, "2026-01-15 오후 3:00:07 (EST)", "2026-01-15 3:00:07 PM (EST)"},
		{"New York in summer", "2026-07-15T19:00:07Z", ny, "2026-07-15 오후 3:00:07 (EDT)", "2026-07-15 3:00:07 PM (EDT)"},
		{"the last second before the clocks go forward", "2026-03-08T06:59:59Z", ny, "2026-03-08 오전 1:59:59 (EST)", "2026-03-08 1:59:59 AM (EST)"},
		{"the first second after", "2026-03-08T07:00:00Z", ny, "2026-03-08 오전 3:00:00 (EDT)", "2026-03-08 3:00:00 AM (EDT)"},
		{"the hour said twice in autumn, first", "2026-11-01T05:30:00Z", ny, "2026-11-01 오전 1:30:00 (EDT)", "2026-11-01 1:30:00 AM (EDT)"},
		{"the hour said twice in autumn, second", "2026-11-01T06:30:00Z", ny, "2026-11-01 오전 1:30:00 (EST)", "2026-11-01 1:30:00 AM (EST)"},
		{"UTC", "2026-12-01T06:04:05Z", time.UTC, "2026-12-01 오전 6:04:05 (UTC)", "2026-12-01 6:04:05 AM (UTC)"},
		{"no zone given: UTC", "2026-12-01T06:04:05Z", nil, "2026-12-01 오전 6:04:05 (UTC)", "2026-12-01 6:04:05 AM (UTC)"},
		{"a zone the database names by offset", "2026-12-01T06:04:05Z", zone("Asia/Ho_Chi_Minh"), "2026-12-01 오후 1:04:05 (UTC+7)", "2026-12-01 1:04:05 PM (UTC+7)"},
		{"an offset with minutes", "2026-12-01T06:04:05Z", zone("Asia/Kathmandu"), "2026-12-01 오전 11:49:05 (UTC+5:45)", "2026-12-01 11:49:05 AM (UTC+5:45)"},
		{"a negative offset", "2026-12-01T06:04:05Z", zone("America/Sao_Paulo"), "2026-12-01 오전 3:04:05 (UTC-3)", "2026-12-01 3:04:05 AM (UTC-3)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			at := utc(c.at)
			if got := Format("ko", at, c.loc); got != c.ko {
				t.Errorf("ko: %q, want %q", got, c.ko)
			}
			if got := Format("en", at, c.loc); got != c.en {
				t.Errorf("en: %q, want %q", got, c.en)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	for _, name := range []string{"Asia/Seoul", "America/New_York", "UTC", "America/Argentina/ComodRivadavia", "Etc/GMT+9"} {
		if loc, err := Load(name); err != nil || loc.String() != name {
			t.Errorf("Load(%q) = %v, %v; want the zone", name, loc, err)
		}
	}
	for _, name := range []string{"", "Local", "/etc/localtime", "../../etc/passwd", "Asia/Nowhere", "Asia/Seoul\n", "Asia/Seoul; x=1",
		strings.Repeat("A", 65), "Asia/../Asia/Seoul"} {
		if loc, err := Load(name); err == nil {
			t.Errorf("Load(%q) = %v, want an error", name, loc)
		} else if !strings.Contains(err.Error(), "Asia/Seoul") {
			t.Errorf("Load(%q): %v; want the error to show a name that works", name, err)
		}
	}
}

func TestZonesKeepsOnlyZones(t *testing.T) {
	var z Zones
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for _, name := range []string{"Asia/Seoul", "America/New_York", "Nowhere/At_All", "Asia/Seoul"} {
				loc, err := z.Load(name)
				if (err == nil) != (name != "Nowhere/At_All") || (err == nil && loc.String() != name) {
					t.Errorf("Load(%q) = %v, %v", name, loc, err)
				}
			}
		})
	}
	wg.Wait()
	if len(z.m) != 2 {
		t.Errorf("the cache holds %d zones, want the 2 valid ones: %v", len(z.m), z.m)
	}
}
