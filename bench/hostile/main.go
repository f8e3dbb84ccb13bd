// Command hostile measures what each upload of the hostile corpus
// (testdata/hostile, written by go run ./testdata/hostile/gen) costs the
// upload service, against the ceiling every upload of at most 10 MiB must
// stay under: 1 s of CPU, 64 MiB of RSS, 8 MiB in Redis and
// 1 MiB of JSON answer. It prints JSON: one object per file, then the worst
// of each figure.
//
//	go run ./bench/hostile                      # every file
//	go run ./bench/hostile -only merges-10000   # the files whose name holds this
//
// It starts a real redis-server and the embedded Kafka broker, then runs
// each file in a child process of its own (this program again), so that
// the child's peak RSS is that file's alone: the child checks the file
// (the dry run: Uploader.Check) and uploads it (Uploader.Upload: parse,
// Redis, Kafka) as the upload service does, with the production defaults.
// Figures per file:
//   - check_cpu_ms, upload_cpu_ms: user + system CPU of the process
//     (getrusage) during Check and during Upload;
//   - rss_growth_mib: the child's peak RSS less its RSS just before Check;
//   - redis_bytes: MEMORY USAGE of the upload's keys after Upload;
//   - check_answer_bytes, upload_answer_bytes: the JSON answer of
//     POST /v1/uploads?dry_run=true and POST /v1/uploads as producer/httpapi
//     builds it (the problem document when the file is refused);
//   - answers: every answer the service gives about the file (the check
//     page and its fragment, Register without confirmation, the
//     dry run's and the upload's JSON, the detail and history pages, the
//     status JSON, the event stream's first event, the report and the fix
//     file), in Korean and English, each with its bytes, CPU and RSS
//     growth (internal/hostile/answers), the service's handler with the
//     production defaults, under GOMEMLIMIT=460MiB (the shipped sizing).
//
// The output's "worst_answers" is the worst bytes, CPU and RSS of each
// answer kind in each language over the corpus, and which file; "service"
// is what the template download costs a request and what a form of 10 MiB
// of part headers costs, and "other_seller" the latencies of a seller's
// normal requests while another's worst check is answered again and again
// (-other-seller, default 20 s; 0 leaves it out).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/internal/hostile"
	"github.com/bulkreg/bulkreg/internal/hostile/answers"
	"github.com/bulkreg/bulkreg/internal/redisproc"
	"github.com/bulkreg/bulkreg/producer/httpapi"
	"github.com/bulkreg/bulkreg/producer/upload"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// figures are one file's costs.
type figures struct {
	File              string  `json:"file"`
	Bytes             int     `json:"upload_bytes"`
	Outcome           string  `json:"outcome"` // "accepted: 500 rows, 0 valid" or the refusal code
	CheckCPUms        float64 `json:"check_cpu_ms"`
	UploadCPUms       float64 `json:"upload_cpu_ms"`
	CheckWallms       float64 `json:"check_wall_ms"`
	RSSGrowthMiB      float64 `json:"rss_growth_mib"`
	RedisBytes        int64   `json:"redis_bytes"`
	CheckAnswerBytes  int     `json:"check_answer_bytes"`
	UploadAnswerBytes int     `json:"upload_answer_bytes"`
	// Answers are every answer about the file (internal/hostile/answers).
	Answers []answers.Answer `json:"answers,omitempty"`
	Error   string           `json:"error,omitempty"`
}

func main() {
	dir := flag.String("dir", filepath.Join("testdata", "hostile"), "the hostile corpus")
	only := flag.String("only", "", "measure only the files whose name holds this")
	child := flag.String("child", "", "(internal) measure this one upload of the corpus")
	redisAddr := flag.String("redis", "", "(internal) the redis-server of the parent")
	brokers := flag.String("brokers", "", "(internal) the Kafka broker of the parent")
	timeout := flag.Duration("timeout", 2*time.Minute, "give up on one file after this long")
	withAnswers := flag.Bool("answers", true, "measure every answer about each file too (the pages, the JSON, the events, the reports)")
	otherSeller := flag.Duration("other-seller", 20*time.Second, "measure another seller's latencies during the worst check this long (0: not)")
	flag.Parse()
	if *child != "" {
		f, err := measure(*dir, *child, *redisAddr, strings.Split(*brokers, ","), *withAnswers)
		if err != nil {
			f.Error = err.Error()
		}
		if err := json.NewEncoder(os.Stdout).Encode(f); err != nil {
			log.Fatal(err)
		}
		return
	}
	if err := run(*dir, *only, *timeout, *withAnswers, *otherSeller); err != nil {
		log.Fatal(err)
	}
}

func run(dir, only string, timeout time.Duration, withAnswers bool, otherSeller time.Duration) error {
	files, err := hostile.Names(dir)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "bench-hostile-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	rp, err := redisproc.Start(context.Background(), tmp, 0)
	if err != nil {
		return err
	}
	defer rp.Stop()
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, bulkreg.DefaultTopic))
	if err != nil {
		return err
	}
	defer kc.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var all []figures
	for _, f := range files {
		if only != "" && !strings.Contains(f, only) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		cmd := exec.CommandContext(ctx, self, "-dir", dir, "-child", f, "-redis", rp.Addr, "-brokers", strings.Join(kc.ListenAddrs(), ","),
			"-answers="+strconv.FormatBool(withAnswers))
		cmd.Env = append(os.Environ(), "GOMEMLIMIT=460MiB")
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		cancel()
		var fg figures
		if err == nil {
			err = json.Unmarshal(out, &fg)
		}
		if err != nil {
			fg = figures{File: filepath.Base(f), Error: fmt.Sprintf("the child failed: %v", err)}
		}
		all = append(all, fg)
		fmt.Fprintf(os.Stderr, "%-36s check %7.1f ms CPU, upload %7.1f ms CPU, RSS +%6.1f MiB, Redis %9d B, answers %8d / %8d B  %s %s\n",
			fg.File, fg.CheckCPUms, fg.UploadCPUms, fg.RSSGrowthMiB, fg.RedisBytes, fg.CheckAnswerBytes, fg.UploadAnswerBytes, fg.Outcome, fg.Error)
	}
	worst := map[string]any{}
	pick := func(name string, v func(figures) float64) {
		best := figures{}
		bv := -1.0
		for _, f := range all {
			if x := v(f); x > bv {
				bv, best = x, f
			}
		}
		worst[name] = map[string]any{"file": best.File, "value": bv}
	}
	pick("check_cpu_ms", func(f figures) float64 { return f.CheckCPUms })
	pick("upload_cpu_ms", func(f figures) float64 { return f.UploadCPUms })
	pick("rss_growth_mib", func(f figures) float64 { return f.RSSGrowthMiB })
	pick("redis_bytes", func(f figures) float64 { return float64(f.RedisBytes) })
	pick("check_answer_bytes", func(f figures) float64 { return float64(f.CheckAnswerBytes) })
	pick("upload_answer_bytes", func(f figures) float64 { return float64(f.UploadAnswerBytes) })
	out := map[string]any{
		"machine":       machine(),
		"ceiling":       map[string]any{"cpu_ms": 1000, "rss_mib": 64, "redis_bytes": 8 << 20, "answer_bytes": 1 << 20, "other_seller_p99_ms": 100},
		"files":         all,
		"worst":         worst,
		"worst_answers": worstAnswers(all),
	}
	svc, err := service(rp.Addr, kc.ListenAddrs())
	if err != nil {
		return err
	}
	out["service"] = svc
	if otherSeller > 0 {
		lat, err := otherSellerLatency(dir, rp.Addr, kc.ListenAddrs(), otherSeller)
		if err != nil {
			return err
		}
		out["other_seller"] = lat
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// machine names where the figures were measured.
func machine() map[string]any {
	host, _ := os.Hostname()
	m := map[string]any{"host": host, "nproc": runtime.NumCPU(), "go": runtime.Version(), "os": runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m["cpu"] = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

func measure(dir, name, redisAddr string, brokers []string, withAnswers bool) (figures, error) {
	data, err := hostile.Load(dir, name)
	f := figures{File: name, Bytes: len(data)}
	if err != nil {
		return f, err
	}
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	w, err := upload.NewWriter(upload.WriterOptions{Brokers: brokers, Topic: bulkreg.DefaultTopic, WriteTimeout: 10 * time.Second})
	if err != nil {
		return f, err
	}
	defer w.Close()
	store := uploadstatus.New(rdb, 7*24*time.Hour)
	up := &upload.Uploader{Parser: excel.NewParser(excel.Options{}), Writer: w, Statuses: store, Index: store,
		PublishTimeout: 10 * time.Second, StaleAfter: time.Minute}
	seller := "hostile-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := rdb.Ping(ctx).Err(); err != nil {
		return f, err
	}
	runtime.GC()
	debug.FreeOSMemory()
	base := hostile.RSS()

	c0, t0 := hostile.CPU(), time.Now()
	chk, cerr := up.Check(ctx, seller, data)
	f.CheckWallms = ms(time.Since(t0))
	f.CheckCPUms = ms(hostile.CPU() - c0)
	f.CheckAnswerBytes = CheckAnswer(chk, cerr)

	c1 := hostile.CPU()
	res, uerr := up.Upload(ctx, upload.Request{SellerID: seller, FileName: name, Data: data})
	f.UploadCPUms = ms(hostile.CPU() - c1)
	f.UploadAnswerBytes = UploadAnswer(res, uerr)
	f.RSSGrowthMiB = float64(max(0, hostile.MaxRSS()-base)) / (1 << 20)
	f.Outcome = outcome(res, uerr)
	if res.UploadID != "" {
		for _, part := range []string{"meta", "states", "rows", "cells"} {
			n, err := rdb.MemoryUsage(ctx, "bulkreg:upload:{"+res.UploadID+"}:"+part, 0).Result()
			if err == nil {
				f.RedisBytes += n
			}
		}
	}
	if uerr != nil && !errors.Is(uerr, upload.ErrRefused) {
		return f, uerr
	}
	if withAnswers {
		// Another seller, so that the upload above is not this one's
		// duplicate: every answer is measured from the file's first upload.
		tok, err := httpapi.MintToken([]byte(benchSecret), seller+"-a", time.Hour, time.Now())
		if err != nil {
			return f, err
		}
		srv := &httpapi.Server{Uploader: up, Auth: httpapi.Auth{Secret: []byte(benchSecret)}}
		f.Answers, err = answers.Run(ctx, srv.Handler(), data, answers.Options{Token: tok, FileName: name, RSS: true})
		if err != nil {
			return f, err
		}
	}
	return f, nil
}

// benchSecret signs the bench's sellers' tokens.
const benchSecret = "bench-hostile-0123456789abcdef0123456789"

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func outcome(res upload.Result, err error) string {
	if ref, ok := upload.Refused(err); ok {
		return "refused: " + ref.Code
	}
	if err != nil || res.Sheet == nil {
		return "error"
	}
	return fmt.Sprintf("accepted: %d rows, %d valid", len(res.Sheet.Rows), res.Sheet.Valid())
}

// problemAnswer is producer/httpapi's problem document of a refusal (its
// type is unexported there); the other answers are httpapi's own types.
type problemAnswer struct {
	Type     string           `json:"type"`
	Title    string           `json:"title"`
	Status   int              `json:"status"`
	Code     string           `json:"code"`
	Detail   string           `json:"detail"`
	Problems []upload.Problem `json:"problems,omitempty"`
}

func size(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return -1
	}
	return len(b)
}

func refusalSize(err error) int {
	ref, ok := upload.Refused(err)
	if !ok {
		return size(problemAnswer{Status: 503, Code: "unavailable", Detail: "the upload could not be processed now; try again shortly"})
	}
	return size(problemAnswer{Type: "about:blank", Title: "Unprocessable Entity", Status: 422, Code: ref.Code, Detail: ref.Message, Problems: ref.Problems})
}

// CheckAnswer is the size of the dry run's answer.
func CheckAnswer(c *upload.Checked, err error) int {
	if err != nil {
		return refusalSize(err)
	}
	return size(httpapi.CheckResponse{DryRun: true, Total: len(c.Rows), Valid: c.Valid, Invalid: c.Invalid, AlreadyRegistered: c.AlreadyRegistered,
		Problems: c.Problems, Warnings: c.Warnings})
}

// UploadAnswer is the size of the upload's answer.
func UploadAnswer(res upload.Result, err error) int {
	if err != nil {
		return refusalSize(err)
	}
	a := httpapi.UploadResponse{UploadID: res.UploadID, Duplicate: res.Duplicate, Resumed: res.Resumed, State: res.Upload.State, Total: res.Upload.Total,
		Published: res.Published, Invalid: res.Invalid, AlreadyRegistered: res.AlreadyRegistered, StatusURL: "/v1/uploads/" + res.UploadID}
	if res.Sheet != nil {
		a.Warnings = upload.Problems(res.Sheet.Warnings)
		for _, row := range res.Sheet.Rows {
			a.Problems = append(a.Problems, upload.Problems(row.Problems)...)
		}
	}
	return size(a)
}
