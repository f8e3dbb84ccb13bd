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
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/bulkreg/bulkreg/compliance"
	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/producer"
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
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

func printProblems(w io.Writer, ps []excel.Problem) {
	for _, p := range ps {
		fmt.Fprintf(w, "  %s\n", p.Error())
	}
}

func cmdUpload(ctx context.Context, e *cli, args []string) int {
	s := defaults()
	fs := e.flagSet("upload")
	seller := fs.String("seller", "", "seller id the rows are registered for (required)")
	strict := fs.Bool("strict", false, "refuse the whole upload if any row is invalid (nothing is published)")
	wait := fs.Bool("wait", false, "show progress on stderr until every row is registered or failed; exit 0 only if all registered")
	check := s.bind(fs, e.getenv, gKafka|gRedis|gPublish|gStatus|gWait|gFile)
	pos, code, ok := e.parseArgs(fs, args, 1, "one FILE", func() error {
		if *seller == "" {
			return errors.New("--seller is required: the seller id the rows are registered for")
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
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	up, closeAll, err := s.uploader(log)
	if err != nil {
		return e.errorf("%v", err)
	}
	defer closeAll()
	res, err := up.Upload(ctx, producer.Request{SellerID: *seller, FileName: filepath.Base(pos[0]), Data: data, Strict: *strict})
	if err != nil {
		var fe *excel.FileError
		var ir *producer.InvalidRowsError
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
		fmt.Fprintf(e.stderr, "%s %s, %s recorded as failed\n", count(res.Published, "row"), verb, count(res.Invalid, "invalid row"))
		if res.Sheet != nil {
			for _, r := range res.Sheet.Rows {
				printProblems(e.stderr, r.Problems)
			}
		}
	}
	if !*wait {
		return exitOK
	}
	return e.waitFor(ctx, up.Status, res.UploadID, s.pollInterval)
}

func (e *cli) waitFor(ctx context.Context, st producer.StatusGetter, id string, interval time.Duration) int {
	tty := isTerminal(e.stderr)
	last := ""
	final, err := producer.WaitDone(ctx, st, id, interval, func(s uploadstatus.Status) {
		line := producer.ProgressBar(s, 40)
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
		return e.errorf("%v", err)
	}
	fmt.Fprintf(e.stderr, "upload %s: %d registered, %d failed of %s\n", id, final.Registered, final.Failed, count(final.Total, "row"))
	printFailed(e.stderr, final)
	if final.State == uploadstatus.PublishFailed {
		return e.errorf("publishing failed: %s; send the same file again", final.StateReason)
	}
	if final.Registered != final.Total {
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

func cmdCheck(ctx context.Context, e *cli, args []string) int {
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
		for _, p := range producer.Problems(problems) {
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
			fmt.Fprintf(e.stdout, "%s: %d valid, %d with problems (%s)\n", count(len(sheet.Rows), "row"), valid, len(sheet.Rows)-valid, count(len(problems), "problem"))
		}
	}
	if len(problems) > 0 {
		return exitFailed
	}
	return exitOK
}

func (e *cli) getStatus(ctx context.Context, s *settings, id string) (uploadstatus.Status, *uploadstatus.Store, func(), int) {
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

func cmdStatus(ctx context.Context, e *cli, args []string) int {
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
	if *wait {
		return e.waitFor(ctx, store, pos[0], s.pollInterval)
	}
	if *asJSON {
		if st.Rows == nil {
			st.Rows = []uploadstatus.RowResult{}
		}
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		enc.Encode(st)
		return exitOK
	}
	fmt.Fprintf(e.stdout, "upload %s  seller %s  file %q  created %s  state %s\n", st.ID, st.SellerID, st.FileName,
		st.CreatedAt.Local().Format(time.DateTime), st.State)
	if st.StateReason != "" {
		fmt.Fprintf(e.stdout, "  %s\n", st.StateReason)
	}
	fmt.Fprintf(e.stdout, "%s: %d registered, %d failed, %d waiting\n", count(st.Total, "row"), st.Registered, st.Failed, st.Waiting)
	printFailed(e.stdout, st)
	return exitOK
}

func cmdReport(ctx context.Context, e *cli, args []string) int {
	s := defaults()
	fs := e.flagSet("report")
	failedOnly := fs.Bool("failed-only", false, "only the failed rows, in a file the seller can fix and upload again")
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
	cells, err := store.Cells(ctx, st.ID)
	if err != nil {
		return e.errorf("%v", err)
	}
	rows := producer.ReportRows(st, cells)
	if err := writeXLSX(pos[1], func(w io.Writer) error { return excel.WriteReport(w, st.Header, rows, *failedOnly) }); err != nil {
		return e.errorf("%v", err)
	}
	fmt.Fprintf(e.stderr, "wrote %s: %s (%d registered, %d failed, %d waiting)\n", pos[1], count(len(rows), "row"), st.Registered, st.Failed, st.Waiting)
	return exitOK
}

func writeXLSX(path string, write func(io.Writer) error) error {
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return err
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func cmdTemplate(_ context.Context, e *cli, args []string) int {
	fs := e.flagSet("template")
	pos, code, ok := e.parseArgs(fs, args, 1, "one output FILE", nil)
	if !ok {
		return code
	}
	if err := writeXLSX(pos[0], excel.WriteTemplate); err != nil {
		return e.errorf("%v", err)
	}
	fmt.Fprintf(e.stderr, "wrote the upload template to %s\n", pos[0])
	return exitOK
}

func cmdToken(_ context.Context, e *cli, args []string) int {
	s := defaults()
	fs := e.flagSet("token")
	seller := fs.String("seller", "", "seller id the token names (this or --operator)")
	operator := fs.String("operator", "", "an operator's name: the token reads GET /v1/compliance, no seller's uploads")
	ttl := fs.Duration("ttl", 24*time.Hour, "how long the token is valid")
	check := s.bind(fs, e.getenv, gSecret)
	_, code, ok := e.parseArgs(fs, args, 0, "no arguments", func() error {
		if (*seller == "") == (*operator == "") {
			return errors.New("give exactly one of --seller (a seller's token) or --operator (an operator's token)")
		}
		if *ttl <= 0 {
			return fmt.Errorf("--ttl must be greater than 0, got %s", *ttl)
		}
		return check()
	})
	if !ok {
		return code
	}
	mint, name := producer.MintToken, *seller
	if *operator != "" {
		mint, name = producer.MintOperatorToken, *operator
	}
	tok, err := mint([]byte(s.jwtSecret), name, *ttl, time.Now())
	if err != nil {
		return e.errorf("%v", err)
	}
	fmt.Fprintln(e.stdout, tok)
	return exitOK
}

func cmdCompliance(ctx context.Context, e *cli, args []string) int {
	s := defaults()
	fs := e.flagSet("compliance")
	asJSON := fs.Bool("json", false, "print the report as one JSON object")
	retention := compliance.DefaultRetention
	check := s.bind(fs, e.getenv, gRedis|gLimit)
	fs.DurationVar(&retention, "call-retention", retention, "how long calls stay in the history (as the consumers record them)")
	_, code, ok := e.parseArgs(fs, args, 0, "no arguments", check)
	if !ok {
		return code
	}
	rdb := s.redis()
	defer rdb.Close()
	rep, err := compliance.NewRecorder(rdb, retention).Report(ctx, s.shared.Limit, s.shared.Window)
	if err != nil {
		return e.errorf("%v", err)
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
	} else {
		producer.WriteComplianceText(e.stdout, rep)
	}
	if rep.Exceeded {
		return exitFailed
	}
	return exitOK
}

func cmdServe(ctx context.Context, e *cli, args []string) int {
	s := defaults()
	fs := e.flagSet("serve")
	check := s.bind(fs, e.getenv, gKafka|gRedis|gLimit|gPublish|gStatus|gFile|gHTTP|gSecret)
	if _, code, ok := e.parseArgs(fs, args, 0, "no arguments", check); !ok {
		return code
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(s.logLevel))
	log := slog.New(slog.NewJSONHandler(e.stderr, &slog.HandlerOptions{Level: level}))
	up, closeAll, err := s.uploader(log)
	if err != nil {
		return e.errorf("%v", err)
	}
	defer closeAll()
	rdb := s.redis()
	defer rdb.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := producer.NewMetrics(reg)
	up.Metrics = m
	auth := producer.Auth{Secret: []byte(s.jwtSecret), Leeway: 30 * time.Second}
	srv := &producer.Server{
		Uploader: up, Auth: auth, MaxFileSize: int64(s.maxFileSize), MaxUploads: s.maxUploads, Gatherer: reg, Metrics: m, Logger: log,
		Health:     func(ctx context.Context) error { return rdb.Ping(ctx).Err() },
		Compliance: producer.ComplianceHandler(auth, compliance.NewRecorder(rdb, compliance.DefaultRetention), s.shared.Limit, s.shared.Window),
	}
	hs := producer.NewHTTPServer(s.addr, srv.Handler(), s.readTimeout, s.httpWriteTimeout)
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return e.errorf("--addr %s: %v", s.addr, err)
	}
	log.Info("serving uploads", "addr", ln.Addr().String(), "topic", s.shared.Topic, "brokers", s.shared.KafkaBrokers)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return e.errorf("serve: %v", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing requests in progress", "timeout", s.shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), s.shutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return e.errorf("shutdown: %v", err)
	}
	return exitOK
}
