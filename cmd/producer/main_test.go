package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/compliance"
	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/producer/httpapi"
	"github.com/bulkreg/bulkreg/producer/upload"
	"github.com/bulkreg/bulkreg/throttle"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

type result struct {
	code           int
	stdout, stderr string
}

func runCLI(env map[string]string, args ...string) result {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errb)
	return result{code, out.String(), errb.String()}
}

// writeSheet writes an English-header workbook; a price of "" is left empty
// (a missing required value).
func writeSheet(t *testing.T, prices ...string) string {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	sh := f.GetSheetName(0)
	f.SetSheetRow(sh, "A1", &[]any{"seller_sku", "name", "category_code", "price", "stock", "shipping_fee"})
	for i, p := range prices {
		row := []any{fmt.Sprintf("SKU-%d", i), "item", "50000123", p, 5, 0}
		if n, err := strconv.Atoi(p); err == nil {
			row[3] = n
		}
		f.SetSheetRow(sh, "A"+strconv.Itoa(i+2), &row)
	}
	path := filepath.Join(t.TempDir(), "products.xlsx")
	if err := f.SaveAs(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestUsageErrorsNameTheFlag(t *testing.T) {
	cases := []struct {
		args []string
		env  map[string]string
		code int
		want string
	}{
		{nil, nil, exitUsage, "producer: a subcommand is needed"},
		{[]string{"frobnicate"}, nil, exitUsage, `unknown subcommand "frobnicate"`},
		{[]string{"upload", "f.xlsx"}, nil, exitUsage, "--seller is required"},
		{[]string{"upload", "--seller", "s", "--bogus", "f.xlsx"}, nil, exitUsage, "-bogus"},
		{[]string{"upload", "--seller", "s"}, nil, exitUsage, "want one FILE"},
		{[]string{"upload", "--seller", "s", "--publish-timeout", "0s", "f"}, nil, exitUsage, "--publish-timeout (BULKREG_PUBLISH_TIMEOUT)"},
		{[]string{"upload", "--seller", "s", "f"}, map[string]string{"BULKREG_WRITE_TIMEOUT": "soon"}, exitUsage, "BULKREG_WRITE_TIMEOUT"},
		{[]string{"upload", "--seller", "s", "--kafka-brokers", "", "f"}, nil, exitUsage, "--kafka-brokers"},
		{[]string{"check", "a", "b"}, nil, exitUsage, "want one FILE, got 2"},
		{[]string{"check", "--max-file-size", "-1", "a"}, nil, exitUsage, "--max-file-size"},
		{[]string{"report", "id"}, nil, exitUsage, "want an upload ID and an output FILE"},
		{[]string{"serve"}, nil, exitUsage, "--jwt-secret (BULKREG_JWT_SECRET) or --jwt-public-keys (BULKREG_JWT_PUBLIC_KEYS): one is needed"},
		{[]string{"serve"}, map[string]string{"BULKREG_JWT_SECRET": "short"}, exitUsage, "--jwt-secret (BULKREG_JWT_SECRET): must be at least 32 bytes"},
		{[]string{"serve"}, map[string]string{"BULKREG_JWT_SECRET": strings.Repeat("k", 32), "BULKREG_JWT_OPERATOR_SECRET": strings.Repeat("k", 32)}, exitUsage, "--jwt-operator-secret (BULKREG_JWT_OPERATOR_SECRET): must differ"},
		{[]string{"serve", "--jwt-public-keys", "/nonexistent.pem"}, nil, exitUsage, "--jwt-public-keys (BULKREG_JWT_PUBLIC_KEYS)"},
		{[]string{"serve", "--jwt-audience", ""}, map[string]string{"BULKREG_JWT_SECRET": strings.Repeat("k", 32)}, exitUsage, "--jwt-audience"},
		{[]string{"token", "--seller", ".."}, map[string]string{"BULKREG_JWT_SECRET": strings.Repeat("k", 32)}, exitFailed, "bad seller id"},
		{[]string{"token", "--seller", "a/b"}, map[string]string{"BULKREG_JWT_SECRET": strings.Repeat("k", 32)}, exitFailed, "bad seller id"},
		{[]string{"token", "--seller", "a\nb"}, map[string]string{"BULKREG_JWT_SECRET": strings.Repeat("k", 32)}, exitFailed, "bad seller id"},
		{[]string{"token", "--seller", "s", "--ttl", "720h"}, map[string]string{"BULKREG_JWT_SECRET": strings.Repeat("k", 32)}, exitFailed, "at most 24h0m0s"},
		{[]string{"token", "--operator", "ops"}, map[string]string{"BULKREG_JWT_SECRET": strings.Repeat("k", 32)}, exitUsage, "--jwt-operator-secret (BULKREG_JWT_OPERATOR_SECRET) is needed"},
		{[]string{"upload", "--seller", "../x", "f.xlsx"}, nil, exitUsage, "--seller: bad seller id"},
		{[]string{"upload", "--seller", "s", "--stale-after", "10s", "f"}, nil, exitUsage, "--stale-after (BULKREG_STALE_AFTER): must be longer than --publish-timeout"},
		{[]string{"serve", "--http-write-timeout", "5s"}, nil, exitUsage, "--http-write-timeout (BULKREG_HTTP_WRITE_TIMEOUT): must be longer"},
		{[]string{"serve", "--seller-center-url", "seller.example.com/signin"}, map[string]string{"BULKREG_JWT_SECRET": strings.Repeat("k", 32)}, exitUsage, "--seller-center-url (BULKREG_SELLER_CENTER_URL): want an absolute http:// or https:// URL"},
		{[]string{"serve", "--seller-time-zone", "Asia/Nowhere"}, nil, exitUsage, `--seller-time-zone (BULKREG_SELLER_TIME_ZONE): time zone "Asia/Nowhere" is not in the time zone database: want an IANA name such as Asia/Seoul`},
		{[]string{"serve"}, map[string]string{"BULKREG_SELLER_TIME_ZONE": "Local"}, exitUsage, "--seller-time-zone (BULKREG_SELLER_TIME_ZONE)"},
		{[]string{"token"}, nil, exitUsage, "exactly one of --seller"},
		{[]string{"status", "--poll-interval", "x", "id"}, nil, exitUsage, "-poll-interval"},
	}
	for _, c := range cases {
		r := runCLI(c.env, c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("producer %q: exit %d, stderr %q; want exit %d naming %q", c.args, r.code, r.stderr, c.code, c.want)
		}
	}
	for _, sub := range []string{"upload", "check", "status", "report", "template", "serve", "token", "compliance"} {
		r := runCLI(nil, sub, "-h")
		if r.code != exitOK || !strings.Contains(r.stdout, "usage: producer "+sub) || (sub != "template" && !strings.Contains(r.stdout, "flags:\n  -")) {
			t.Errorf("producer %s -h: exit %d, stdout %q", sub, r.code, r.stdout)
		}
		if sub != "token" && !strings.Contains(r.stdout, "exit status: 0 ") {
			t.Errorf("producer %s -h does not say what its exit statuses mean:\n%s", sub, r.stdout)
		}
		// Only upload and status have --wait, so only they offer its polling.
		if hasPoll := strings.Contains(r.stdout, "-poll-interval"); hasPoll != (sub == "upload" || sub == "status") {
			t.Errorf("producer %s -h lists -poll-interval: %v", sub, hasPoll)
		}
		if strings.Contains(r.stdout, "flags:\n") && !strings.Contains(r.stdout, "flags:\n  -") {
			t.Errorf("producer %s -h prints an empty flag list:\n%s", sub, r.stdout)
		}
	}
	if r := runCLI(nil, "serve", "-h"); !strings.Contains(r.stdout, "POST /v1/uploads") || !strings.Contains(r.stdout, `"file"`) {
		t.Errorf("producer serve -h does not list the endpoints:\n%s", r.stdout)
	}
}

func TestCheck(t *testing.T) {
	good := writeSheet(t, "1000", "2000")
	if r := runCLI(nil, "check", good); r.code != exitOK || !strings.Contains(r.stdout, "2 rows: 2 valid") {
		t.Errorf("check of a good file: %+v", r)
	}
	// A CSV file as Korean Excel saves it (CP949), whatever its name says.
	csv, err := os.ReadFile(filepath.Join("..", "..", "testdata", "korean-headers-cp949.csv"))
	if err != nil {
		t.Fatal(err)
	}
	renamed := filepath.Join(t.TempDir(), "products.xlsx")
	if err := os.WriteFile(renamed, csv, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(nil, "check", renamed); r.code != exitOK || !strings.Contains(r.stdout, "5 rows: 5 valid") {
		t.Errorf("check of a CP949 CSV file: %+v", r)
	}
	// Excel's "Unicode text": UTF-16 with tabs, saved as .txt.
	for _, name := range []string{"korean-headers-unicode-text.txt", "korean-headers-semicolon.csv"} {
		if r := runCLI(nil, "check", filepath.Join("..", "..", "testdata", name)); r.code != exitOK || !strings.Contains(r.stdout, "5 rows: 5 valid") {
			t.Errorf("check of %s: %+v", name, r)
		}
	}
	bad := writeSheet(t, "1000", "12,000원", "")
	r := runCLI(nil, "check", "--json", bad)
	if r.code != exitFailed {
		t.Errorf("check --json of a bad file: exit %d, want 1", r.code)
	}
	// One object per line, exactly these fields (params: the facts of the
	// message, as in the HTTP API's problems): a script reads them.
	equalJSONLines(t, "check --json of a bad file", r.stdout, []string{
		`{"row":3,"column":"price","cell":"D3","code":"not_whole_number","message":"price must be a whole number greater than 0 and at most 1,000,000,000, got \"12,000원\"; type the number only, without 원 or ₩","params":{"field":"price","kind":"unit","max":"1,000,000,000","min":"1","value":"\"12,000원\""}}`,
		`{"row":4,"column":"price","cell":"D4","code":"required","message":"price is required but the cell is empty","params":{"field":"price"}}`,
	})
	if r := runCLI(nil, "check", bad); r.code != exitFailed || !strings.Contains(r.stdout, "D3: price must be a whole number") ||
		!strings.Contains(r.stdout, "3 rows: 1 valid, 2 with problems (2 problems)") {
		t.Errorf("check of a bad file: %+v", r)
	}
	notXLSX := filepath.Join(t.TempDir(), "x.xlsx")
	os.WriteFile(notXLSX, []byte("%PDF-1.7\n\x00\x01"), 0o644)
	r = runCLI(nil, "check", "--json", notXLSX)
	if r.code != exitFailed {
		t.Errorf("check --json of a file that is not a spreadsheet: exit %d, want 1", r.code)
	}
	equalJSONLines(t, "check --json of a file that is not a spreadsheet", r.stdout, []string{
		`{"row":0,"column":"","cell":"","code":"not_xlsx","message":"the file is a PDF document, not a spreadsheet; put the products in the template (.xlsx), one a row, and save it as \"Excel Workbook (.xlsx)\" or \"CSV UTF-8 (Comma delimited)\""}`,
	})
	r = runCLI(nil, "check", "--json", filepath.Join("..", "..", "testdata", "missing-column.xlsx"))
	if r.code != exitFailed {
		t.Errorf("check --json of a file without price and stock: exit %d, want 1", r.code)
	}
	equalJSONLines(t, "check --json of a file without price and stock", r.stdout, []string{
		`{"row":1,"column":"price","cell":"","code":"missing_column","message":"the required column 판매가 (price) is missing from the header row (row 1)","params":{"column":"판매가 (price)","kind":"one","row":"1"}}`,
		`{"row":1,"column":"stock","cell":"","code":"missing_column","message":"the required column 재고수량 (stock) is missing from the header row (row 1)","params":{"column":"재고수량 (stock)","kind":"one","row":"1"}}`,
	})
	if r := runCLI(nil, "check", filepath.Join(t.TempDir(), "absent.xlsx")); r.code != exitFailed || !strings.Contains(r.stderr, "absent.xlsx") {
		t.Errorf("check of a file that does not exist: %+v", r)
	}
}

// equalJSONLines compares JSON lines as JSON (field order aside), each with
// exactly the fields of the wanted line.
func equalJSONLines(t *testing.T, what, got string, want []string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) != len(want) {
		t.Errorf("%s: %d lines, want %d:\n%s", what, len(lines), len(want), got)
		return
	}
	for i, line := range lines {
		var g, w map[string]any
		if err := json.Unmarshal([]byte(line), &g); err != nil {
			t.Errorf("%s: line %q is not JSON: %v", what, line, err)
			continue
		}
		if err := json.Unmarshal([]byte(want[i]), &w); err != nil {
			t.Fatalf("bad want %q: %v", want[i], err)
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s, line %d:\n got %s\nwant %s", what, i+1, line, want[i])
		}
	}
}

func TestTemplateAndToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.xlsx")
	if r := runCLI(nil, "template", path); r.code != exitOK {
		t.Fatalf("template: %+v", r)
	}
	f, err := excelize.OpenFile(path)
	if err != nil {
		t.Fatalf("template is not an xlsx: %v", err)
	}
	f.Close()
	// check refuses an untouched template as upload does, for the same
	// reason (upload parses before it reaches Kafka or Redis).
	up := runCLI(nil, "upload", "--seller", "s", "--kafka-brokers", "127.0.0.1:1", "--redis-addrs", "127.0.0.1:1", path)
	_, reason, found := strings.Cut(strings.SplitN(up.stderr, "\n", 2)[0], " is refused: ")
	if up.code != exitFailed || !found || !strings.Contains(reason, "no product rows") {
		t.Fatalf("upload of a fresh template: exit %d, stderr %q; want 1 and a refusal", up.code, up.stderr)
	}
	if r := runCLI(nil, "check", path); r.code != exitFailed || !strings.Contains(r.stdout, path+" is refused: "+reason) {
		t.Errorf("check of a fresh template: exit %d, stdout %q; want 1 and upload's refusal %q", r.code, r.stdout, reason)
	}
	if r := runCLI(nil, "check", "--json", path); r.code != exitFailed || !strings.Contains(r.stdout, `"code":"no_rows"`) {
		t.Errorf("check --json of a fresh template: exit %d, stdout %q; want 1 and code no_rows", r.code, r.stdout)
	}
	// -h describes the template as it is: the example row is on the instructions sheet.
	if r := runCLI(nil, "template", "-h"); strings.Contains(r.stdout, "one example row is") || !strings.Contains(r.stdout, "no rows yet") {
		t.Errorf("template -h: %s", r.stdout)
	}
	// An existing file is kept unless --force, and replaced whole with it.
	if err := os.WriteFile(path, []byte("the seller's own work"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(nil, "template", path); r.code != exitFailed || !strings.Contains(r.stderr, "exists: give --force") {
		t.Errorf("template over an existing file: exit %d, stderr %q; want 1 and --force named", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(path); string(b) != "the seller's own work" {
		t.Errorf("template without --force changed the existing file: %q", b)
	}
	if r := runCLI(nil, "template", "--force", path); r.code != exitOK {
		t.Errorf("template --force: %+v", r)
	}
	if f, err := excelize.OpenFile(path); err != nil {
		t.Errorf("template --force did not write the template: %v", err)
	} else {
		f.Close()
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*.tmp")); len(left) > 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
	env := map[string]string{"BULKREG_JWT_SECRET": strings.Repeat("k", 32)}
	r := runCLI(env, "token", "--seller", "seller-9", "--ttl", "1m")
	seller, err := httpapi.Auth{Secret: []byte(strings.Repeat("k", 32))}.Verify(strings.TrimSpace(r.stdout))
	if r.code != exitOK || err != nil || seller != "seller-9" {
		t.Errorf("token: %+v → %q %v", r, seller, err)
	}
}

// TestUploadWaitStatusReport runs the CLI against the embedded broker and a
// real Redis, with a stand-in consumer recording row results.
func TestUploadWaitStatusReport(t *testing.T) {
	brokers := testkafka.Start(t, 1, bulkreg.DefaultTopic)
	rs := testredis.Start(t)
	env := map[string]string{"BULKREG_KAFKA_BROKERS": strings.Join(brokers, ","), "BULKREG_REDIS_ADDRS": rs.Addr, "BULKREG_POLL_INTERVAL": "50ms"}
	store := uploadstatus.New(rs.Client(), time.Hour)

	path := writeSheet(t, "1000", "2000", "abc", "4000")
	data, _ := os.ReadFile(path)
	sum := sha256.Sum256(data)
	id := upload.UploadID("seller-1", hex.EncodeToString(sum[:]))

	// The stand-in consumer registers every published row once the upload exists.
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for ctx.Err() == nil {
			if st, err := store.Get(ctx, id); err == nil && st.State == uploadstatus.Published {
				for _, row := range []int{2, 3, 5} {
					store.RecordRow(ctx, id, uploadstatus.RowResult{Row: row, State: uploadstatus.Registered, ProductID: "P" + strconv.Itoa(row)})
				}
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	r := runCLI(env, "upload", "--seller", "seller-1", path, "--wait")
	<-done
	if strings.TrimSpace(r.stdout) != id {
		t.Errorf("upload printed %q, want the id %s", r.stdout, id)
	}
	// Row 4 is invalid, so not every row is registered: exit 1 with the reason.
	if r.code != exitFailed || !strings.Contains(r.stderr, "100%") || !strings.Contains(r.stderr, "3 registered, 0 already registered, 1 failed of 4 rows") || !strings.Contains(r.stderr, "row 4: D4") {
		t.Errorf("upload --wait: exit %d, stderr:\n%s", r.code, r.stderr)
	}

	r = runCLI(env, "status", "--json", id)
	var st uploadstatus.Status
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || r.code != exitOK || st.Registered != 3 || st.Failed != 1 || st.SellerID != "seller-1" {
		t.Errorf("status --json: %+v %v", r, err)
	}
	if r := runCLI(env, "status", id); !strings.Contains(r.stdout, "4 rows: 3 registered, 0 already registered, 1 failed, 0 waiting") || !strings.Contains(r.stdout, "row 4:") {
		t.Errorf("status: %+v", r)
	}
	if r := runCLI(env, "status", "0000000000000000"); r.code != exitFailed || !strings.Contains(r.stderr, "no upload") {
		t.Errorf("status of an unknown id: %+v", r)
	}

	out := filepath.Join(t.TempDir(), "failed.xlsx")
	if r := runCLI(env, "report", "--failed-only", id, out); r.code != exitOK || !strings.Contains(r.stderr, "1 row, the failed ones of upload") {
		t.Fatalf("report --failed-only: %+v; want it to name the 1 row it wrote", r)
	}
	// The seller's copy is not overwritten by asking again, only with --force.
	if r := runCLI(env, "report", id, out); r.code != exitFailed || !strings.Contains(r.stderr, "exists: give --force") {
		t.Errorf("report over an existing file: %+v; want exit 1 naming --force", r)
	}
	f, err := excelize.OpenFile(out)
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := f.GetRows(f.GetSheetName(0))
	f.Close()
	text := fmt.Sprint(rows)
	if !strings.Contains(text, "SKU-2") || strings.Contains(text, "SKU-0") || strings.Contains(text, "SKU-1 ") {
		t.Errorf("failed-only report %v: want only SKU-2 (row 4)", rows)
	}
	// The failed-only report goes back in as it is: the parser reads its one
	// row (now row 2) with the same problem, and once the seller fixes the
	// cell the file uploads.
	r = runCLI(env, "check", "--json", out)
	if r.code != exitFailed {
		t.Errorf("check of the failed-only report: exit %d, want 1", r.code)
	}
	equalJSONLines(t, "check --json of the failed-only report", r.stdout, []string{
		`{"row":2,"column":"price","cell":"D2","code":"not_whole_number","message":"price must be a whole number greater than 0 and at most 1,000,000,000, got \"abc\"","params":{"field":"price","max":"1,000,000,000","min":"1","value":"\"abc\""}}`,
	})
	if f, err = excelize.OpenFile(out); err != nil {
		t.Fatal(err)
	}
	if err := f.SetCellInt(f.GetSheetName(0), "D2", 3000); err != nil {
		t.Fatal(err)
	}
	if err := f.Save(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if r := runCLI(env, "check", out); r.code != exitOK || !strings.Contains(r.stdout, "1 row: 1 valid\n") {
		t.Errorf("check of the fixed failed-only report: %+v", r)
	}
	if r := runCLI(env, "upload", "--seller", "seller-1", out); r.code != exitOK || strings.TrimSpace(r.stdout) == id ||
		!strings.Contains(r.stderr, "1 row published\n") {
		t.Errorf("upload of the fixed failed-only report: %+v", r)
	}

	// The same file again: a duplicate, nothing new in Kafka, exit 0 without --wait.
	r = runCLI(env, "upload", "--seller", "seller-1", path)
	if r.code != exitOK || strings.TrimSpace(r.stdout) != id || !strings.Contains(r.stderr, "nothing published again") {
		t.Errorf("second upload: %+v", r)
	}
}

// startServe runs `producer serve` on free loopback ports with its Kafka
// and Redis, its public URL scheme + its address, and waits for /healthz.
// It returns the environment it runs with; cancel stops it, and its exit
// code arrives on exited.
func startServe(t *testing.T, scheme string) (env map[string]string, cancel func(), exited chan int) {
	t.Helper()
	brokers := testkafka.Start(t, 1, bulkreg.DefaultTopic)
	rs := testredis.Start(t)
	freeAddr := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	addr, adminAddr := freeAddr(), freeAddr()
	env = map[string]string{"BULKREG_KAFKA_BROKERS": strings.Join(brokers, ","), "BULKREG_REDIS_ADDRS": rs.Addr,
		"BULKREG_JWT_SECRET": strings.Repeat("s", 40), "BULKREG_ADDR": addr, "BULKREG_ADMIN_ADDR": adminAddr, "BULKREG_LOG_LEVEL": "warn",
		"BULKREG_PUBLIC_URL": scheme + addr, "BULKREG_SELLER_CENTER_URL": "https://seller.example.com/signin?to=bulkreg"}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	exited = make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"serve"}, func(k string) string { return env[k] }, io.Discard, io.Discard)
	}()
	testwait.For(t, 10*time.Second, "serve to answer /healthz", func() bool {
		resp, err := http.Get("http://" + adminAddr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return env, cancel, exited
}

// TestServe runs `producer serve` as wired by main: a token minted by
// `producer token` uploads through it, and it stops cleanly on cancel.
func TestServe(t *testing.T) {
	env, cancel, exited := startServe(t, "http://")
	base, admin := "http://"+env["BULKREG_ADDR"], "http://"+env["BULKREG_ADMIN_ADDR"]
	tok := strings.TrimSpace(runCLI(env, "token", "--seller", "seller-7").stdout)
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", "p.xlsx")
	data, _ := os.ReadFile(writeSheet(t, "100", "200"))
	fw.Write(data)
	mw.Close()
	req, _ := http.NewRequest("POST", base+"/v1/uploads", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var up httpapi.UploadResponse
	json.Unmarshal(b, &up)
	if resp.StatusCode != 201 || up.Published != 2 {
		t.Errorf("upload through serve: %d %s", resp.StatusCode, b)
	}
	if resp, err := http.Get(base + "/metrics"); err != nil || resp.StatusCode != 404 {
		t.Errorf("/metrics on the sellers' port: %v, want 404 (it is on the admin listener)", resp.Status)
	}
	// The pages that ask to sign in link to the seller center serve is
	// configured with.
	if resp, err := http.Get(base + "/uploads"); err != nil {
		t.Fatal(err)
	} else {
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 || !strings.Contains(string(page), `href="https://seller.example.com/signin?to=bulkreg"`) {
			t.Errorf("the uploads page without a session: %d, want 401 linking to the seller center:\n%.2000s", resp.StatusCode, page)
		}
	}
	// A sign-in link from `producer token --link` opens a session on the
	// pages: its page's button posts the link's token.
	link := strings.TrimSpace(runCLI(env, "token", "--seller", "seller-7", "--link").stdout)
	if !strings.HasPrefix(link, base+"/signin?token=") {
		t.Fatalf("token --link printed %q, want a link under %s", link, base)
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	if resp, err := browser.Get(link); err != nil || resp.StatusCode != 200 {
		t.Fatalf("opening the sign-in link: %v %v", resp, err)
	}
	if resp, err := browser.PostForm(base+"/signin", url.Values{"token": {linkToken(link)}}); err != nil || resp.StatusCode != 200 || resp.Request.URL.Path != "/uploads" {
		t.Fatalf("the sign-in link's button: %v %v, want the uploads page", resp, err)
	}
	if resp, err := browser.Get(base + "/uploads"); err != nil || resp.StatusCode != 200 {
		t.Errorf("the uploads page after signing in: %v %v", resp, err)
	} else {
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(page), "p.xlsx") {
			t.Errorf("the uploads page does not list the upload:\n%.2000s", page)
		}
	}
	if resp, err := http.Get(admin + "/metrics"); err != nil || resp.StatusCode != 200 {
		t.Errorf("metrics: %v", err)
	} else {
		m, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(m), "bulkreg_producer_rows_published_total 2") || !strings.Contains(string(m), "go_goroutines") {
			t.Errorf("metrics lack the upload or the runtime: %.300s", m)
		}
	}
	cancel()
	select {
	case code := <-exited:
		if code != exitOK {
			t.Errorf("serve exited %d after cancel, want 0", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop within 10s of cancel")
	}
}

func TestComplianceCommand(t *testing.T) {
	rs := testredis.Start(t)
	env := map[string]string{"BULKREG_REDIS_ADDRS": rs.Addr}
	if r := runCLI(env, "redis-init"); r.code != exitOK {
		t.Fatalf("redis-init: %+v", r)
	}
	rec := compliance.NewRecorder(rs.Client(), time.Hour)
	now := time.Now()
	for i := range 3 {
		if err := rec.Record(context.Background(), "seller-x", compliance.Call{At: now.Add(-time.Second + time.Duration(i)*time.Millisecond), Status: 201, Class: "registered", Key: "u:" + strconv.Itoa(i+2)}); err != nil {
			t.Fatal(err)
		}
	}
	r := runCLI(env, "compliance", "--limit", "5")
	if r.code != exitOK || !regexp.MustCompile(`"seller-x"\s+3\s+3\s+3\s+3\s+0\s+no`).MatchString(r.stdout) {
		t.Errorf("compliance within the limit: %+v", r)
	}
	r = runCLI(env, "compliance", "--limit", "2", "--json")
	var rep compliance.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != exitFailed || !rep.Exceeded || rep.Sellers[0].MaxInWindow != 3 {
		t.Errorf("compliance over the limit: exit %d, %+v, %v; want exit 1 and exceeded", r.code, rep, err)
	}
	// It counts as the consumers' --policy says the API does.
	r = runCLI(map[string]string{"BULKREG_REDIS_ADDRS": rs.Addr, "BULKREG_POLICY": "token-bucket"}, "compliance", "--limit", "5", "--burst", "3")
	if r.code != exitOK || !strings.Contains(r.stdout, "a token bucket of 3") || !regexp.MustCompile(`MOST TOKENS TAKEN.*\n"seller-x"\s+3\s+3\s+3\s`).MatchString(r.stdout) {
		t.Errorf("compliance of a token bucket: %+v", r)
	}
	if r := runCLI(env, "compliance", "--policy", "leaky"); r.code != exitUsage || !strings.Contains(r.stderr, "--policy (BULKREG_POLICY)") {
		t.Errorf("compliance --policy leaky: exit %d, %s; want a usage error naming the flag", r.code, r.stderr)
	}
	// --call-retention is a BULKREG_* variable like every setting.
	bad := map[string]string{"BULKREG_REDIS_ADDRS": rs.Addr, "BULKREG_CALL_RETENTION": "soon"}
	if r := runCLI(bad, "compliance"); r.code != exitUsage || !strings.Contains(r.stderr, "BULKREG_CALL_RETENTION") {
		t.Errorf("compliance with BULKREG_CALL_RETENTION=soon: exit %d, %s; want a usage error naming the variable", r.code, r.stderr)
	}
	if r := runCLI(nil, "compliance", "-h"); !strings.Contains(r.stdout, "BULKREG_CALL_RETENTION") {
		t.Errorf("compliance -h does not name BULKREG_CALL_RETENTION:\n%s", r.stdout)
	}
}

// TestRedisInit: a new Redis is initialised once; again changes nothing; a
// Redis that lost part of its markers is refused, and the compliance report
// then names what its history cannot cover instead of claiming compliance.
func TestRedisInit(t *testing.T) {
	rs := testredis.Start(t)
	env := map[string]string{"BULKREG_REDIS_ADDRS": rs.Addr}
	if r := runCLI(env, "redis-init"); r.code != exitOK || !strings.Contains(r.stdout, "initialised: 16384 hash-slot markers created") {
		t.Fatalf("redis-init on a new Redis: %+v", r)
	}
	if r := runCLI(env, "redis-init"); r.code != exitOK || !strings.Contains(r.stdout, "already initialised") {
		t.Errorf("redis-init again: %+v", r)
	}
	rec := compliance.NewRecorder(rs.Client(), time.Hour)
	if err := rec.Record(context.Background(), "seller-y", compliance.Call{At: time.Now(), Status: 201, Class: "registered", Key: "u:1"}); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(env, "compliance"); r.code != exitOK || strings.Contains(r.stdout, "NOT COVERED") {
		t.Errorf("compliance on an initialised Redis: %+v, want exit 0 and every history covered", r)
	}
	// The seller's hash slot loses its data (its marker with it).
	markers := throttle.NewMarkers()
	if err := rs.Client().Del(context.Background(), markers.OfSeller("seller-y")).Err(); err != nil {
		t.Fatal(err)
	}
	r := runCLI(env, "redis-init")
	if r.code != exitFailed || !strings.Contains(r.stderr, "holds 16383 of its 16384 hash-slot markers") || !strings.Contains(r.stderr, "this Redis lost data") {
		t.Errorf("redis-init on a Redis that lost a marker: %+v, want exit 1 saying it is not new", r)
	}
	r = runCLI(env, "compliance")
	if r.code != exitFailed || !strings.Contains(r.stdout, `NOT COVERED`) || !strings.Contains(r.stdout, `seller "seller-y"`) ||
		!strings.Contains(r.stdout, "compliance is not vouched for") {
		t.Errorf("compliance after the loss: %+v, want exit 1 and seller-y NOT COVERED", r)
	}
}

// secretEnv holds a value for every secret any bulkreg command reads.
var secretEnv = map[string]string{
	"BULKREG_JWT_SECRET":           "jwt-seller-secret-4f1c9a7e2b6d8053e1",
	"BULKREG_JWT_OPERATOR_SECRET":  "jwt-operator-secret-9d2e7b1c4a6f3085",
	"BULKREG_REDIS_PASSWORD":       "redis-password-7c3e9a1f",
	"BULKREG_KAFKA_PASSWORD":       "kafka-password-2b8d4e6a",
	"BULKREG_REGISTRY_AUTH_HEADER": "X-Api-Key: registry-key-5e1a7c9b3d",
}

// -h of every subcommand, and a usage error, with every secret in the
// environment print none of them.
func TestHelpPrintsNoSecrets(t *testing.T) {
	var runs []result
	runs = append(runs, runCLI(secretEnv, "-h"), runCLI(secretEnv))
	for _, c := range commands() {
		runs = append(runs, runCLI(secretEnv, c.name, "-h"), runCLI(secretEnv, c.name, "--bogus"),
			runCLI(secretEnv, c.name, "--limit", "x"), runCLI(secretEnv, c.name, "--kafka-sasl-mechanism", "gssapi"))
	}
	for _, r := range runs {
		for name, v := range secretEnv {
			_, value, _ := strings.Cut(v, ": ")
			if value == "" {
				value = v
			}
			if strings.Contains(r.stdout+r.stderr, value) {
				t.Errorf("the value of %s is printed:\n%s%s", name, r.stdout, r.stderr)
			}
		}
	}
	if r := runCLI(secretEnv, "serve", "-h"); !strings.Contains(r.stdout, "-jwt-secret") || !strings.Contains(r.stdout, "never printed") {
		t.Errorf("serve -h does not list the secret's flag:\n%s", r.stdout)
	}
}

// A seller id with a line break cannot forge a line of the compliance table.
func TestComplianceTableQuotesSellerIDs(t *testing.T) {
	rs := testredis.Start(t)
	rec := compliance.NewRecorder(rs.Client(), time.Hour)
	evil := "x\nFORGED  0  0  0  0  0  no"
	if err := rec.Record(context.Background(), evil, compliance.Call{At: time.Now(), Status: 201, Class: "registered", Key: "u:2"}); err != nil {
		t.Fatal(err)
	}
	r := runCLI(map[string]string{"BULKREG_REDIS_ADDRS": rs.Addr}, "compliance")
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(line, "FORGED") {
			t.Errorf("a seller id forged a line of the table:\n%s", r.stdout)
		}
	}
	if !strings.Contains(r.stdout, `"x\nFORGED`) {
		t.Errorf("the seller id is not quoted:\n%s", r.stdout)
	}
}

// Redis with requirepass: upload, status and compliance work with
// BULKREG_REDIS_PASSWORD, and fail naming the cause without it.
func TestRedisPasswordEndToEnd(t *testing.T) {
	brokers := testkafka.Start(t, 1, bulkreg.DefaultTopic)
	rs := testredis.Start(t, "--requirepass", "pw-Zq81x")
	env := map[string]string{"BULKREG_KAFKA_BROKERS": strings.Join(brokers, ","), "BULKREG_REDIS_ADDRS": rs.Addr,
		"BULKREG_REDIS_PASSWORD": "pw-Zq81x"}
	path := writeSheet(t, "1000", "2000")
	r := runCLI(env, "upload", "--seller", "seller-1", path)
	if r.code != exitOK {
		t.Fatalf("upload with the Redis password: %+v", r)
	}
	id := strings.TrimSpace(r.stdout)
	if r := runCLI(env, "status", id); r.code != exitOK || !strings.Contains(r.stdout, "2 rows: 0 registered, 0 already registered, 0 failed, 2 waiting") {
		t.Errorf("status with the Redis password: %+v", r)
	}
	if r := runCLI(env, "redis-init"); r.code != exitOK {
		t.Errorf("redis-init with the Redis password: %+v", r)
	}
	if r := runCLI(env, "compliance"); r.code != exitOK {
		t.Errorf("compliance with the Redis password: %+v", r)
	}
	delete(env, "BULKREG_REDIS_PASSWORD")
	if r := runCLI(env, "status", id); r.code != exitFailed || !strings.Contains(r.stderr, "NOAUTH") {
		t.Errorf("status without the Redis password: %+v, want exit 1 naming NOAUTH", r)
	}
	env["BULKREG_REDIS_PASSWORD"] = "pw-Nope7"
	if r := runCLI(env, "status", id); r.code != exitFailed || strings.Contains(r.stderr, "pw-Nope7") {
		t.Errorf("status with a wrong Redis password: %+v, want exit 1 without echoing it", r)
	}
}

// No usage error or -h prints the password of a --public-url, however
// malformed the URL.
func TestPublicURLPasswordIsNeverPrinted(t *testing.T) {
	const pw = "url-password-e5a3"
	secretEnv := map[string]string{"BULKREG_JWT_SECRET": strings.Repeat("s", 40)}
	for _, raw := range []string{"http//user:" + pw + "@uploads.example.com", "http://user:" + pw + "@", "ftp://user:" + pw + "@uploads.example.com"} {
		for _, args := range [][]string{{"serve", "--public-url", raw}, {"token", "--seller", "s", "--link", "--public-url", raw}} {
			r := runCLI(secretEnv, args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, "--public-url (BULKREG_PUBLIC_URL)") || strings.Contains(r.stdout+r.stderr, pw) {
				t.Errorf("producer %q: exit %d\n%s%s\nwant a usage error naming --public-url without the password", args, r.code, r.stdout, r.stderr)
			}
		}
	}
	env := map[string]string{"BULKREG_PUBLIC_URL": "https://user:" + pw + "@uploads.example.com"}
	if r := runCLI(env, "serve", "-h"); strings.Contains(r.stdout+r.stderr, pw) || !strings.Contains(r.stdout+r.stderr, "-public-url") {
		t.Errorf("serve -h prints the public URL's password:\n%s%s", r.stdout, r.stderr)
	}
}

// --public-url HTTPS://… (the scheme in upper case) marks the session
// cookie Secure: a scheme is case-insensitive (url.Parse lower-cases it), so
// comparing the text with "https://" would not do.
func TestPublicURLSchemeInAnyCaseMakesTheCookieSecure(t *testing.T) {
	env, _, _ := startServe(t, "HTTPS://")
	link := strings.TrimSpace(runCLI(env, "token", "--seller", "seller-7", "--link").stdout)
	want := "https://" + env["BULKREG_ADDR"] + "/signin?token="
	if !strings.HasPrefix(link, want) {
		t.Fatalf("token --link printed %q, want it to start with %s", link, want)
	}
	// The service itself listens on plain http here (TLS ends at a proxy).
	// The link's page posts its token; the answer to that post sets the
	// cookie (a redirect the client must not follow: a Secure cookie is not
	// sent back over plain http).
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.PostForm("http://"+env["BULKREG_ADDR"]+"/signin", url.Values{"token": {linkToken(link)}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cookies := resp.Cookies()
	if resp.StatusCode >= 400 || len(cookies) != 1 || !cookies[0].Secure || cookies[0].Name != "__Host-bulkreg_session" {
		t.Errorf("sign-in with --public-url HTTPS://…: %d, cookies %v; want one Secure __Host-bulkreg_session cookie", resp.StatusCode, cookies)
	}
}

// linkToken is the token of a sign-in link, which the link's page posts.
func linkToken(link string) string {
	u, err := url.Parse(link)
	if err != nil {
		return ""
	}
	return u.Query().Get("token")
}

// TestTemplateWithCategories: template reads --categories-file (or its
// variable) and the template lists the categories on a sheet whose codes
// its category column takes; a file that cannot be read or holds a bad
// line is a usage error naming the setting and the line, for template and
// serve alike, before anything is written or started.
func TestTemplateWithCategories(t *testing.T) {
	dir := t.TempDir()
	cats := filepath.Join(dir, "categories.csv")
	if err := os.WriteFile(cats, []byte("카테고리코드,카테고리명\n50000803,티셔츠\nCAT-101,셔츠\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, how := range []struct {
		env  map[string]string
		args []string
	}{
		{nil, []string{"--categories-file", cats}},
		{map[string]string{"BULKREG_CATEGORIES_FILE": cats}, nil},
	} {
		path := filepath.Join(t.TempDir(), "t.xlsx")
		if r := runCLI(how.env, append(append([]string{"template"}, how.args...), path)...); r.code != exitOK {
			t.Fatalf("template %v: %+v", how, r)
		}
		f, err := excelize.OpenFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rows, _ := f.GetRows(excel.CategorySheet)
		dvs, _ := f.GetDataValidations(excel.TemplateSheet)
		list := ""
		for _, dv := range dvs {
			if dv.Type == "list" {
				list = dv.Sqref + " " + dv.Formula1
			}
		}
		f.Close()
		if len(rows) != 3 || rows[1][0] != "50000803" || rows[2][1] != "셔츠" || list != "C2:C501 '"+excel.CategorySheet+"'!$A$2:$A$3" {
			t.Errorf("template %v: categories %q, list check %q", how, rows, list)
		}
	}
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte("A-1,x\nA 2,y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "never.xlsx")
	for _, args := range [][]string{
		{"template", "--categories-file", bad, out},
		{"template", "--categories-file", filepath.Join(dir, "missing.csv"), out},
		{"serve", "--jwt-secret", strings.Repeat("k", 32), "--categories-file", bad},
	} {
		r := runCLI(nil, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "--categories-file (BULKREG_CATEGORIES_FILE)") {
			t.Errorf("producer %q: exit %d, stderr %q; want 2 naming the setting", args, r.code, r.stderr)
		}
		if args[2] == bad && !strings.Contains(r.stderr, "line 2: category_code must be a code") {
			t.Errorf("producer %q: stderr %q does not name the bad line", args, r.stderr)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("template wrote a file despite a bad categories file")
	}
}
