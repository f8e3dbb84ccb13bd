package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/compliance"
	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/internal/buildinfo"
	"github.com/bulkreg/bulkreg/internal/config"
	"github.com/bulkreg/bulkreg/internal/health"
	"github.com/bulkreg/bulkreg/internal/logsum"
	"github.com/bulkreg/bulkreg/internal/sellertime"
	"github.com/bulkreg/bulkreg/messages"
	"github.com/bulkreg/bulkreg/producer/httpapi"
	"github.com/bulkreg/bulkreg/producer/upload"
	"github.com/bulkreg/bulkreg/termui"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

func readFile(path string, max int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes (--max-file-size)", path, max)
	}
	return data, nil
}

// count says "1 row", "2 rows": sellers read these lines.
func count(n int, noun string) string {
	return strconv.Itoa(n) + " " + messages.Plural(n, noun, noun+"s")
}

func printProblems(w io.Writer, ps []excel.Problem) {
	for _, p := range ps {
		fmt.Fprintf(w, "  %s\n", p.Error())
	}
}

func cmdUpload(ctx context.Context, e *env, args []string) int {
	s := defaults()
	fs := e.flagSet("upload")
	seller := fs.String("seller", "", "seller id the rows are registered for (required)")
	strict := fs.Bool("strict", false, "refuse the whole upload if any row is invalid (nothing is published)")
	wait := fs.Bool("wait", false, "show progress on stderr until every row is registered or failed; exit 0 only if all registered")
	check := s.bind(fs, e.getenv, gKafka|gRedis|gPublish|gStatus|gWait|gFile|gShare)
	pos, code, ok := e.parseArgs(fs, args, 1, "one FILE", func() error {
		if *seller == "" {
			return errors.New("--seller is required: the seller id the rows are registered for")
		}
		if err := bulkreg.ValidSellerID(*seller); err != nil {
			return fmt.Errorf("--seller: %w", err)
		}
		return check()
	})
	if !ok {
		return code
	}
	data, err := readFile(pos[0], s.maxFileSize)
	if err != nil {
		return e.errorf("%v", err)
	}
	log := slog.New(slog.NewTextHandler(e.stderr, config.LogOptions(slog.LevelWarn)))
	up, closeAll, err := s.uploader(log)
	if err != nil {
		return e.errorf("%v", err)
	}
	defer closeAll()
	res, err := up.Upload(ctx, upload.Request{SellerID: *seller, FileName: filepath.Base(pos[0]), Data: data, Strict: *strict})
	if err != nil {
		var fe *excel.FileError
		var ir *upload.InvalidRowsError
		switch {
		case errors.As(err, &fe):
			e.errorf("%s is refused: %v", pos[0], fe)
			printProblems(e.stderr, fe.Problems)
		case errors.As(err, &ir):
			e.errorf("%s is refused: %v", pos[0], ir)
			printProblems(e.stderr, ir.Problems)
		default:
			e.errorf("%v", err)
		}
		return exitFailed
	}
	fmt.Fprintln(e.stdout, res.UploadID)
	switch {
	case res.Duplicate:
		fmt.Fprintf(e.stderr, "%s was uploaded before as %s (%s, %s): nothing published again\n",
			pos[0], res.UploadID, res.Upload.FileName, res.Upload.CreatedAt.Local().Format(time.DateTime))
	default:
		verb := "published"
		if res.Resumed {
			verb = "published again (the earlier attempt failed part way)"
		}
		// Each count is said when it is not 0.
		if res.Published > 0 {
			fmt.Fprintf(e.stderr, "%s %s", count(res.Published, "row"), verb)
		} else {
			fmt.Fprint(e.stderr, "nothing published")
		}
		if res.Invalid > 0 {
			fmt.Fprintf(e.stderr, ", %s recorded as failed", count(res.Invalid, "invalid row"))
		}
		if res.AlreadyRegistered > 0 {
			fmt.Fprintf(e.stderr, ", %s registered before and not sent again", count(res.AlreadyRegistered, "row"))
		}
		fmt.Fprintln(e.stderr)
		if res.Sheet != nil {
			for _, r := range res.Sheet.Rows {
				printProblems(e.stderr, r.Problems)
			}
		}
	}
	if !*wait {
		return exitOK
	}
	rdb := s.redis()
	defer rdb.Close()
	return e.waitFor(ctx, up.Statuses, s.marketplace(rdb), res.UploadID, s.pollInterval)
}

func (e *env) waitFor(ctx context.Context, st upload.StatusGetter, m upload.Marketplace, id string, interval time.Duration) int {
	tty := isTerminal(e.stderr)
	last := ""
	final, err := upload.WaitDone(ctx, st, id, interval, func(s uploadstatus.Status) {
		line := termui.ProgressBar(s, 40)
		if v := upload.View(ctx, s, m); v.Notice != "" {
			line += " — " + v.Notice
		}
		switch {
		case tty:
			fmt.Fprintf(e.stderr, "\r%s", line)
		case line != last:
			fmt.Fprintln(e.stderr, line)
		}
		last = line
	})
	if tty {
		fmt.Fprintln(e.stderr)
	}
	if err != nil {
		if final.PartlyLost() {
			printLost(e.stderr, final)
		}
		return e.errorf("%v", err)
	}
	fmt.Fprintf(e.stderr, "upload %s: %d registered, %d already registered, %d failed of %s\n", id, final.Registered, final.AlreadyRegistered, final.Failed, count(final.Total, "row"))
	printFailed(e.stderr, final)
	if final.State == uploadstatus.PublishFailed {
		return e.errorf("publishing failed: %s; send the same file again", final.StateReason)
	}
	if !final.Succeeded() {
		return exitFailed
	}
	return exitOK
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func printFailed(w io.Writer, s uploadstatus.Status) {
	first := true
	for _, r := range s.Rows {
		if r.State != uploadstatus.Failed {
			continue
		}
		if first {
			fmt.Fprintln(w, "failed rows:")
			first = false
		}
		fmt.Fprintf(w, "  row %d: %s", r.Row, r.Reason)
		if r.Code != "" {
			fmt.Fprintf(w, " [%s]", r.Code)
		}
		fmt.Fprintln(w)
	}
}

func cmdCheck(ctx context.Context, e *env, args []string) int {
	s := defaults()
	fs := e.flagSet("check")
	asJSON := fs.Bool("json", false, "print one JSON object per problem: row, column, cell, code, message")
	check := s.bind(fs, e.getenv, gFile)
	pos, code, ok := e.parseArgs(fs, args, 1, "one FILE", check)
	if !ok {
		return code
	}
	data, err := readFile(pos[0], s.maxFileSize)
	if err != nil {
		return e.errorf("%v", err)
	}
	sheet, err := s.parser().Parse(ctx, bytes.NewReader(data))
	var problems []excel.Problem
	var fe *excel.FileError
	switch {
	case errors.As(err, &fe):
		// A file upload refuses, an untouched template (no product rows)
		// included, check refuses too, with the same reason: exit 0 means
		// upload would take the file.
		problems = fe.Problems
		if len(problems) == 0 {
			problems = []excel.Problem{{Code: fe.Code, Message: fe.Message}}
		}
	case err != nil:
		return e.errorf("%v", err)
	default:
		for _, r := range sheet.Rows {
			problems = append(problems, r.Problems...)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		for _, p := range upload.Problems(problems) {
			enc.Encode(p)
		}
	} else {
		if fe != nil {
			fmt.Fprintf(e.stdout, "%s is refused: %v\n", pos[0], fe)
			printProblems(e.stdout, fe.Problems)
		} else {
			valid := len(sheet.Rows)
			for _, r := range sheet.Rows {
				if !r.Valid() {
					valid--
				}
			}
			for _, p := range problems {
				fmt.Fprintln(e.stdout, p.Error())
			}
			for _, w := range sheet.Warnings {
				fmt.Fprintln(e.stderr, "warning:", w.Error())
			}
			// Each count is said when it is not 0: "3 rows: 1 valid, 2 with problems (2 problems)".
			var parts []string
			if valid > 0 {
				parts = append(parts, strconv.Itoa(valid)+" valid")
			}
			if invalid := len(sheet.Rows) - valid; invalid > 0 {
				parts = append(parts, strconv.Itoa(invalid)+" with problems ("+count(len(problems), "problem")+")")
			}
			fmt.Fprintf(e.stdout, "%s: %s\n", count(len(sheet.Rows), "row"), strings.Join(parts, ", "))
		}
	}
	if len(problems) > 0 {
		return exitFailed
	}
	return exitOK
}

func (e *env) getStatus(ctx context.Context, s *settings, id string) (uploadstatus.Status, *uploadstatus.Store, func(), int) {
	rdb := s.redis()
	store := s.store(rdb)
	st, err := store.Get(ctx, id)
	if errors.Is(err, uploadstatus.ErrNotFound) {
		rdb.Close()
		return st, nil, nil, e.errorf("no upload %q (unknown, or older than --status-retention)", id)
	}
	if err != nil {
		rdb.Close()
		return st, nil, nil, e.errorf("%v", err)
	}
	return st, store, func() { rdb.Close() }, exitOK
}

func cmdStatus(ctx context.Context, e *env, args []string) int {
	s := defaults()
	fs := e.flagSet("status")
	asJSON := fs.Bool("json", false, "print the status as one JSON object")
	wait := fs.Bool("wait", false, "show progress until every row is registered or failed")
	check := s.bind(fs, e.getenv, gRedis|gStatus|gWait)
	pos, code, ok := e.parseArgs(fs, args, 1, "one upload ID", check)
	if !ok {
		return code
	}
	st, store, closeRedis, code := e.getStatus(ctx, s, pos[0])
	if code != exitOK {
		return code
	}
	defer closeRedis()
	rdb := s.redis()
	defer rdb.Close()
	m := s.marketplace(rdb)
	if *wait {
		return e.waitFor(ctx, store, m, pos[0], s.pollInterval)
	}
	v := upload.View(ctx, st, m)
	if *asJSON {
		if v.Rows == nil {
			v.Rows = []uploadstatus.RowResult{}
		}
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		enc.Encode(v)
		return exitOK
	}
	if st.PartlyLost() {
		fmt.Fprintf(e.stdout, "upload %s\n", st.ID)
		printLost(e.stdout, st)
		return exitOK
	}
	fmt.Fprintf(e.stdout, "upload %s  seller %q  file %q  created %s  state %s\n", st.ID, st.SellerID, st.FileName,
		st.CreatedAt.Local().Format(time.DateTime), st.State)
	if st.StateReason != "" {
		fmt.Fprintf(e.stdout, "  %s\n", st.StateReason)
	}
	fmt.Fprintf(e.stdout, "%s: %d registered, %d already registered, %d failed, %d waiting\n", count(st.Total, "row"), st.Registered, st.AlreadyRegistered, st.Failed, st.Waiting)
	if v.Notice != "" {
		fmt.Fprintf(e.stdout, "  %s\n", v.Notice)
	}
	printFailed(e.stdout, st)
	return exitOK
}

// printLost says plainly what is left of an upload whose record Redis lost.
func printLost(w io.Writer, st uploadstatus.Status) {
	fmt.Fprintf(w, "PART OF THIS UPLOAD'S STATUS WAS LOST: Redis no longer held it when a row was recorded at %s "+
		"(a restart without persistence, FLUSHALL, or a failover to a replica that had not received it).\n", st.LostAt.Local().Format(time.DateTime))
	fmt.Fprintln(w, "Its file, its row count and the results recorded before then are gone; the rows recorded since are:")
	fmt.Fprintf(w, "%d registered, %d already registered, %d failed (how many rows are still waiting is not known)\n", st.Registered, st.AlreadyRegistered, st.Failed)
	printFailed(w, st)
	fmt.Fprintln(w, "Send the same file again to see every row's result: it keeps its upload id and keys, so rows registered before are not registered twice.")
}

func cmdReport(ctx context.Context, e *env, args []string) int {
	s := defaults()
	fs := e.flagSet("report")
	failedOnly := fs.Bool("failed-only", false, "only the failed rows, in a file the seller can fix and upload again")
	force := fs.Bool("force", false, "replace FILE if it exists (without it, an existing FILE is refused)")
	check := s.bind(fs, e.getenv, gRedis|gStatus)
	pos, code, ok := e.parseArgs(fs, args, 2, "an upload ID and an output FILE", check)
	if !ok {
		return code
	}
	st, store, closeRedis, code := e.getStatus(ctx, s, pos[0])
	if code != exitOK {
		return code
	}
	defer closeRedis()
	rep, err := (&upload.Uploader{Statuses: store}).BuildReport(ctx, st, *failedOnly)
	if err != nil {
		return e.errorf("%v", err)
	}
	if err := writeXLSX(pos[1], *force, func(w io.Writer) error { _, err := w.Write(rep.XLSX); return err }); err != nil {
		return e.errorf("%v", err)
	}
	if *failedOnly {
		fmt.Fprintf(e.stderr, "wrote %s: %s, the failed ones of upload %s\n", pos[1], count(rep.Rows, "row"), st.ID)
		return exitOK
	}
	fmt.Fprintf(e.stderr, "wrote %s: %s (%d registered, %d already registered, %d failed, %d waiting)\n", pos[1], count(rep.Rows, "row"), st.Registered, st.AlreadyRegistered, st.Failed, st.Waiting)
	return exitOK
}

// writeXLSX writes a workbook to path through a temporary file in the same
// folder renamed over it, so a reader never sees half a file and a failed
// write leaves what was there. Without overwrite, an existing path is
// refused (os.Link fails on it, so a file created meanwhile is not replaced
// either).
func writeXLSX(path string, overwrite bool, write func(io.Writer) error) error {
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return err
	}
	if !overwrite {
		if _, err := os.Lstat(path); err == nil {
			return fmt.Errorf("%s exists: give --force to replace it", path)
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if overwrite {
		err = os.Rename(tmp.Name(), path)
	} else if err = os.Link(tmp.Name(), path); errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s exists: give --force to replace it", path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func cmdTemplate(_ context.Context, e *env, args []string) int {
	s := defaults()
	fs := e.flagSet("template")
	force := fs.Bool("force", false, "replace FILE if it exists (without it, an existing FILE is refused)")
	check := s.bind(fs, e.getenv, gTemplate)
	var opts excel.TemplateOptions
	pos, code, ok := e.parseArgs(fs, args, 1, "one output FILE", func() error {
		if err := check(); err != nil {
			return err
		}
		var err error
		opts.Categories, err = s.categories()
		return err
	})
	if !ok {
		return code
	}
	if err := writeXLSX(pos[0], *force, func(w io.Writer) error { return excel.WriteTemplate(w, opts) }); err != nil {
		return e.errorf("%v", err)
	}
	fmt.Fprintf(e.stderr, "wrote the upload template to %s\n", pos[0])
	return exitOK
}

func cmdToken(_ context.Context, e *env, args []string) int {
	s := defaults()
	fs := e.flagSet("token")
	seller := fs.String("seller", "", "seller id the token names (this or --operator): 1 to 64 of A-Z a-z 0-9 _ -")
	operator := fs.String("operator", "", "an operator's name: the token reads GET /v1/compliance, no seller's uploads; signed with --jwt-operator-secret")
	ttl := fs.Duration("ttl", 0, "how long the token is valid, at most --jwt-max-lifetime (default 24h; with --link 10m, at most --link-max-age)")
	link := fs.Bool("link", false, "print a sign-in link for the seller's pages instead: --public-url + /signin?token=…, usable once")
	check := s.bind(fs, e.getenv, gSecret|gLink)
	_, code, ok := e.parseArgs(fs, args, 0, "no arguments", func() error {
		if (*seller == "") == (*operator == "") {
			return errors.New("give exactly one of --seller (a seller's token) or --operator (an operator's token)")
		}
		if *link && *operator != "" {
			return errors.New("--link signs a seller in to the pages; give --seller, not --operator")
		}
		switch {
		case *ttl == 0 && *link:
			*ttl = min(10*time.Minute, s.linkMaxAge)
		case *ttl == 0:
			*ttl = 24 * time.Hour
		case *ttl < 0:
			return fmt.Errorf("--ttl must be greater than 0, got %s", *ttl)
		case *link && *ttl > s.linkMaxAge:
			return fmt.Errorf("--ttl %s: a sign-in link may live at most --link-max-age (%s)", *ttl, s.linkMaxAge)
		}
		if err := check(); err != nil {
			return err
		}
		switch {
		case *seller != "" && s.jwtSecret == "":
			return fmt.Errorf("--jwt-secret (%s) is needed to sign a seller's token", config.EnvName("jwt-secret"))
		case *operator != "" && s.jwtOperatorSecret == "":
			return fmt.Errorf("--jwt-operator-secret (%s) is needed to sign an operator's token", config.EnvName("jwt-operator-secret"))
		}
		return nil
	})
	if !ok {
		return code
	}
	var tok string
	var err error
	switch {
	case *link:
		tok, err = s.minter(s.jwtSecret).Link(s.publicURL, *seller, *ttl, time.Now())
	case *operator != "":
		tok, err = s.minter(s.jwtOperatorSecret).Operator(*operator, *ttl, time.Now())
	default:
		tok, err = s.minter(s.jwtSecret).Seller(*seller, *ttl, time.Now())
	}
	if err != nil {
		return e.errorf("%v", err)
	}
	fmt.Fprintln(e.stdout, tok)
	return exitOK
}

func cmdCompliance(ctx context.Context, e *env, args []string) int {
	s := defaults()
	fs := e.flagSet("compliance")
	asJSON := fs.Bool("json", false, "print the report as one JSON object")
	retention := compliance.DefaultRetention
	check := s.bind(fs, e.getenv, gRedis|gLimit)
	b := config.NewBinder(fs, e.getenv)
	b.Duration(&retention, "call-retention", "how long calls stay in the history (as the consumers record them)")
	_, code, ok := e.parseArgs(fs, args, 0, "no arguments", func() error {
		if retention <= 0 {
			return fmt.Errorf("--call-retention (%s) must be greater than 0, got %s", config.EnvName("call-retention"), retention)
		}
		return errors.Join(b.Err(), check())
	})
	if !ok {
		return code
	}
	rdb := s.redis()
	defer rdb.Close()
	rep, err := compliance.NewRecorder(rdb, retention).SetGlobal(s.shared.GlobalLimit, s.shared.GlobalWindow).Report(ctx, s.policy())
	if err != nil {
		return e.errorf("%v", err)
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
	} else {
		termui.ComplianceTable(e.stdout, rep)
	}
	if rep.Exceeded || !rep.Complete {
		return exitFailed
	}
	return exitOK
}

func cmdServe(ctx context.Context, e *env, args []string) int {
	s := defaults()
	fs := e.flagSet("serve")
	check := s.bind(fs, e.getenv, gKafka|gRedis|gLimit|gMargin|gPublish|gStatus|gFile|gHTTP|gSecret|gLink|gShare|gTemplate)
	var auth httpapi.Auth
	var categories []excel.Category
	if _, code, ok := e.parseArgs(fs, args, 0, "no arguments", func() error {
		if err := check(); err != nil {
			return err
		}
		var err error
		if auth, err = s.auth(); err != nil {
			return err
		}
		categories, err = s.categories()
		return err
	}); !ok {
		return code
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(s.logLevel))
	// Closed last: the counts of lines repeated until shutdown are written.
	summarised := logsum.New(slog.NewJSONHandler(e.stderr, config.LogOptions(level)), s.logRepeat)
	defer summarised.Close()
	log := slog.New(summarised)
	config.RouteRedisLogs(log)
	up, closeAll, err := s.uploader(log)
	if err != nil {
		return e.errorf("%v", err)
	}
	defer closeAll()
	rdb := s.redis()
	defer rdb.Close()
	if e.registered == nil {
		if err := checkRedis(ctx, rdb, log); err != nil {
			return e.errorf("%v", err)
		}
	}
	th, err := s.throttle(rdb)
	if err != nil {
		return e.errorf("%v", err)
	}
	up.Slots = th
	up.Marketplace = s.marketplace(rdb)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildinfo.Collector("producer"))
	up.Metrics = upload.NewMetrics(reg)
	if len(auth.OperatorSecret) == 0 && len(auth.OperatorPublicKeys) == 0 {
		log.Warn("no operator key (--jwt-operator-secret or --jwt-operator-public-keys): GET /v1/compliance refuses every token")
	}
	metrics := httpapi.NewMetrics(reg)
	zone, _ := sellertime.Load(s.sellerTimeZone) // checked with the other settings
	srv := &httpapi.Server{
		Uploader: up, Auth: auth, Sessions: httpapi.NewRedisSessions(rdb), SessionTTL: s.sessionTTL, LinkMaxAge: s.linkMaxAge,
		SecureCookies: s.secureCookie(), SellerCenterURL: s.sellerCenterURL,
		MaxFileSize: int64(s.maxFileSize), Categories: categories, Metrics: metrics, Logger: log,
		MaxUploads: s.maxUploads, MaxUploadsPerSeller: s.maxUploadsPerSeller, MinUploadRate: int64(s.minUploadRate),
		UploadGrace: s.uploadGrace, ReadTimeout: s.readTimeout, WriteTimeout: s.httpWriteTimeout, EventsInterval: s.eventsInterval,
		SellerZone: zone,
		MaxReports: s.maxReports, MaxReportsPerSeller: s.maxReportsPerSeller, MinDownloadRate: int64(s.minDownloadRate), DownloadGrace: s.downloadGrace,
		Compliance: httpapi.ComplianceHandler(auth, compliance.NewRecorder(rdb, compliance.DefaultRetention).SetGlobal(s.shared.GlobalLimit, s.shared.GlobalWindow), s.policy()),
	}
	hs := httpapi.NewHTTPServer(s.addr, srv.Handler(), s.readTimeout, s.httpWriteTimeout)
	hs.RegisterOnShutdown(srv.StopStreams)
	// /readyz: Redis answers (uploads, sessions and progress live there)
	// and a broker names the rows topic with its leaders (an upload
	// publishes its rows before answering).
	ready := s.readiness.Monitor(log,
		health.Check{Name: "redis", Probe: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }},
		health.Check{Name: "kafka", Probe: health.Kafka(s.shared.KafkaDialer(), s.shared.KafkaBrokers, s.shared.Topic)})
	admin := httpapi.NewHTTPServer(s.adminAddr, httpapi.AdminHandler(reg, func(ctx context.Context) error { return rdb.Ping(ctx).Err() }, log,
		func() error { return stopping(ctx) }, ready.Err), 10*time.Second, 30*time.Second)
	if e.registered != nil {
		e.registered(reg)
		return exitOK
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return e.errorf("--addr %s: %v", s.addr, err)
	}
	aln, err := net.Listen("tcp", s.adminAddr)
	if err != nil {
		ln.Close()
		return e.errorf("--admin-addr %s: %v", s.adminAddr, err)
	}
	log.Info("serving uploads", "addr", ln.Addr().String(), "admin_addr", aln.Addr().String(), "public_url", config.Redacted(s.publicURL),
		"topic", s.shared.Topic, "brokers", s.shared.KafkaBrokers, "max_conns_per_ip", s.maxConnsPerIP)
	monCtx, stopMonitor := context.WithCancel(context.Background())
	defer stopMonitor()
	go ready.Run(monCtx)
	errc := make(chan error, 2)
	guard := httpapi.ConnGuard{MaxPerIP: s.maxConnsPerIP, AnonymousIdle: s.anonymousIdle, Metrics: metrics, Logger: log}
	go func() { errc <- hs.Serve(guard.Listener(ln)) }()
	go func() { errc <- admin.Serve(aln) }()
	select {
	case err := <-errc:
		hs.Close()
		admin.Close()
		return e.errorf("serve: %v", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing requests in progress", "timeout", s.shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), s.shutdownTimeout)
	defer cancel()
	err = hs.Shutdown(sctx)
	// The admin listener answers health checks until the uploads are done.
	admin.Shutdown(sctx)
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return e.errorf("shutdown: %v", err)
	}
	return exitOK
}

// stopping fails /readyz once serve was told to stop: it finishes the
// requests in progress and takes no new ones.
func stopping(ctx context.Context) error {
	if ctx.Err() != nil {
		return errors.New("shutting down")
	}
	return nil
}
