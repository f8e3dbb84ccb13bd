package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/producer/upload"
	"github.com/bulkreg/bulkreg/redrive"
)

const redriveDetails = `Reads the dead-letter topic (--topic + ".dlq") up to the end it had when the
command started (no consumer group, nothing committed), selects dead letters by
--upload, --seller, --class and --since/--until (the row's first failure, or
when it was dead-lettered), and publishes each selected row to the rows topic
again with its original key and value: same Idempotency-Key, so a row that did
reach the API is answered as a replay, not registered twice. Each republished
row carries the headers bulkreg-redrive-time, -count and -from.

A row is sent only if its upload's status says it failed; it is moved back to
waiting first (and failed again if publishing fails). Rows that are waiting or
registered are skipped, so running the same redrive twice sends nothing new.
--ignore-status sends rows whose upload status has expired.

Prints one line per row sent (with --dry-run: that would be sent), in columns:
upload, row, seller, class, first failure, message; skipped rows, each with
its reason, and a summary go to stderr.

exit status: 0 done (also when nothing was selected); 1 Kafka or Redis failed
(rows not published by then are failed again); 2 bad flags.`

func cmdRedrive(ctx context.Context, e *env, args []string) int {
	s := defaults()
	fs := e.flagSet("redrive")
	var f redrive.Filter
	var classes, since, until string
	fs.StringVar(&f.Upload, "upload", "", "only rows of this upload id")
	fs.StringVar(&f.Seller, "seller", "", "only rows of this seller id")
	fs.StringVar(&classes, "class", "", "only these error classes, comma-separated (transient, rate_limited, …: the bulkreg-error-class header)")
	fs.StringVar(&since, "since", "", "only rows that first failed at or after this time: RFC 3339 (2026-11-23T10:00:00+09:00) or a duration before now (90m)")
	fs.StringVar(&until, "until", "", "only rows that first failed before this time: RFC 3339 or a duration before now")
	dryRun := fs.Bool("dry-run", false, "list the rows that would be sent; send nothing and change no status")
	ignoreStatus := fs.Bool("ignore-status", false, "send the selected rows whatever their upload status says (for uploads whose status expired)")
	readTimeout := fs.Duration("scan-timeout", 10*time.Second, "longest wait for the next dead letter below the end seen at the start")
	check := s.bind(fs, e.getenv, gKafka|gRedis|gStatus)
	now := time.Now()
	_, code, ok := e.parseArgs(fs, args, 0, "no arguments", func() error {
		var err error
		if f.Since, err = parseWhen(since, now); err != nil {
			return fmt.Errorf("--since: %w", err)
		}
		if f.Until, err = parseWhen(until, now); err != nil {
			return fmt.Errorf("--until: %w", err)
		}
		if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
			return fmt.Errorf("--since (%s) must be before --until (%s)", f.Since.Format(time.RFC3339), f.Until.Format(time.RFC3339))
		}
		if *readTimeout <= 0 {
			return fmt.Errorf("--scan-timeout must be greater than 0, got %s", *readTimeout)
		}
		for _, c := range strings.Split(classes, ",") {
			if c = strings.TrimSpace(c); c != "" {
				f.Classes = append(f.Classes, c)
			}
		}
		return check()
	})
	if !ok {
		return code
	}

	dlq := bulkreg.DLQTopic(s.shared.Topic)
	sc, err := redrive.Scan(ctx, redrive.ScanOptions{Brokers: s.shared.KafkaBrokers, Topic: dlq, ReadTimeout: *readTimeout}, f)
	if err != nil {
		return e.errorf("%v", err)
	}
	w, err := upload.NewWriter(upload.WriterOptions{Brokers: s.shared.KafkaBrokers, Topic: s.shared.Topic})
	if err != nil {
		return e.errorf("%v", err)
	}
	defer w.Close()
	rdb := s.redis()
	defer rdb.Close()
	res, runErr := redrive.Run(ctx, sc.Letters, s.store(rdb), w, redrive.Options{DryRun: *dryRun, IgnoreStatus: *ignoreStatus})

	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	if res.Sent > 0 {
		fmt.Fprintln(tw, "UPLOAD\tROW\tSELLER\tCLASS\tFIRST FAILURE\tMESSAGE")
	}
	skipped := 0
	for _, o := range res.Outcomes {
		l := o.Letter
		if !o.Sent {
			skipped++
			what := fmt.Sprintf("row %d of upload %s", l.Row, l.Upload)
			if l.BadValue != nil {
				what = "dead letter " + l.Where()
			}
			fmt.Fprintf(e.stderr, "skipped %s: %s\n", what, o.Reason)
			continue
		}
		first := "-"
		if !l.FirstFailure.IsZero() {
			first = l.FirstFailure.Local().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", l.Upload, l.Row, l.Seller, orDash(l.Class), first, oneLine(l.Message))
	}
	tw.Flush()
	verb := "sent to " + s.shared.Topic
	if *dryRun {
		verb = "would be sent to " + s.shared.Topic + " (dry run: nothing sent)"
	}
	fmt.Fprintf(e.stderr, "%s of %s in %s selected; %s %s", count(len(sc.Letters), "row"), count(sc.Read, "dead letter"), dlq, count(res.Sent, "row"), verb)
	if skipped > 0 {
		fmt.Fprintf(e.stderr, ", %d skipped", skipped)
	}
	fmt.Fprintln(e.stderr)
	if runErr != nil {
		return e.errorf("%v", runErr)
	}
	return exitOK
}

// parseWhen reads a time as RFC 3339 or as a duration before now; "" is no bound.
func parseWhen(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("want a time in RFC 3339 (2026-11-23T10:00:00+09:00) or a duration before now (90m), got %q", v)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps a message on its row of the listing.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
