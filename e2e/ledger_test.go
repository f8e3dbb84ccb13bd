package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"
	"golang.org/x/text/unicode/norm"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/internal/sandbox"
	"github.com/bulkreg/bulkreg/internal/testbin"
	"github.com/bulkreg/bulkreg/internal/testkafka"
	"github.com/bulkreg/bulkreg/internal/testredis"
	"github.com/bulkreg/bulkreg/internal/testwait"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

// sheetRow is one product row of a test spreadsheet.
type sheetRow struct{ sku, price string }

// writeSheet writes rows under the English header, each product's other
// cells derived from its SKU, so one SKU has the same content in every file.
func writeSheet(t *testing.T, name string, rows []sheetRow) string {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	sh := f.GetSheetName(0)
	if err := f.SetSheetRow(sh, "A1", &[]any{"seller_sku", "name", "category_code", "price", "stock", "shipping_fee"}); err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		row := []any{r.sku, "상품 " + r.sku, "50000123", r.price, 7, 0}
		if n, err := strconv.Atoi(r.price); err == nil {
			row[3] = n
		}
		if err := f.SetSheetRow(sh, "A"+strconv.Itoa(i+2), &row); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), name)
	if err := f.SaveAs(path); err != nil {
		t.Fatal(err)
	}
	return path
}

type run struct {
	code           int
	stdout, stderr string
}

// producer runs the producer CLI to the end.
func producerCLI(t *testing.T, bin string, env []string, args ...string) run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "producer"), args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := run{stdout: stdout.String(), stderr: stderr.String()}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("producer %v: %v", args, err)
		}
		r.code = ee.ExitCode()
	}
	return r
}

func statusOf(t *testing.T, bin string, env []string, id string) uploadstatus.Status {
	t.Helper()
	r := producerCLI(t, bin, env, "status", "--json", id)
	var st uploadstatus.Status
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || r.code != 0 {
		t.Fatalf("producer status --json %s: exit %d, %v\n%s%s", id, r.code, err, r.stdout, r.stderr)
	}
	return st
}

// TestReuploadAndRace runs the SKU ledger end to end, every part a separate
// process: the sandbox registry, four consumers and the producer CLI, with
// real Redis and the embedded broker.
//
// Race: two different files with the same 20 products are both published
// before the consumers start, so their rows race for every SKU in the
// consumers. Each SKU is registered once; its other row ends
// already_registered.
//
// Re-upload: a seller uploads 40 rows of which 4 have a bad price, fixes
// those cells and uploads the whole file again. The sandbox counts exactly
// 40 distinct SKUs and 40 registrations, no 429, and the second upload's
// status says 36 already registered, 4 registered.
func TestReuploadAndRace(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries and runs for about 15 s")
	}
	bin := testbin.Build(t, "producer", "consumer", "registry-sandbox")
	topic := bulkreg.DefaultTopic
	brokers := testkafka.Start(t, 4, topic, bulkreg.DLQTopic(topic))
	rs := testredis.Start(t)
	redisInit(t, bin, rs.Addr)
	addrs := freeAddrs(t, 5)
	registry := addrs[0]
	env := stackEnv(brokers, rs.Addr, registry, 2*time.Second, "BULKREG_POLL_INTERVAL=100ms")
	startSandbox(t, bin, env, registry)
	audit := func(seller string) sandbox.SellerAudit {
		t.Helper()
		var a sandbox.Audit
		if err := getJSON("http://"+registry+"/audit", &a); err != nil {
			t.Fatal(err)
		}
		return a.Sellers[seller]
	}

	// ── Race: both uploads in Kafka before any consumer runs.
	var forward, backward []sheetRow
	for i := range 20 {
		forward = append(forward, sheetRow{fmt.Sprintf("RACE-%02d", i), strconv.Itoa(1000 + i)})
	}
	for i := range forward {
		backward = append(backward, forward[len(forward)-1-i])
	}
	raceIDs := make([]string, 2)
	var wg sync.WaitGroup
	for i, rows := range [][]sheetRow{forward, backward} {
		wg.Go(func() {
			r := producerCLI(t, bin, env, "upload", "--seller", "seller-race", writeSheet(t, fmt.Sprintf("race-%d.xlsx", i), rows))
			if r.code != 0 || !strings.Contains(r.stderr, "20 rows published") {
				t.Errorf("race upload %d: exit %d, %s", i, r.code, r.stderr)
			}
			raceIDs[i] = strings.TrimSpace(r.stdout)
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for i := range 4 {
		start(t, filepath.Join(bin, "consumer"), fmt.Sprintf("consumer-%d", i+1),
			append(env, "BULKREG_METRICS_ADDR="+addrs[1+i], "BULKREG_HEARTBEAT_INTERVAL=1s"))
	}
	var race [2]uploadstatus.Status
	testwait.For(t, 60*time.Second, "both race uploads done", func() bool {
		for i, id := range raceIDs {
			race[i] = statusOf(t, bin, env, id)
		}
		return race[0].Done() && race[1].Done()
	})
	if a := audit("seller-race"); a.Products != 20 || a.Accepted != 20 || a.RateLimited != 0 {
		t.Errorf("race: the sandbox counts %d products, %d registrations, %d × 429; want 20, 20, 0", a.Products, a.Accepted, a.RateLimited)
	}
	if reg, already := race[0].Registered+race[1].Registered, race[0].AlreadyRegistered+race[1].AlreadyRegistered; reg != 20 || already != 20 {
		t.Errorf("race: %d rows registered and %d already registered over both uploads, want 20 and 20", reg, already)
	}
	products := map[string]map[string]bool{} // SKU → product ids its two rows name
	for i, rows := range [][]sheetRow{forward, backward} {
		for _, r := range race[i].Rows {
			sku := rows[r.Row-2].sku
			if products[sku] == nil {
				products[sku] = map[string]bool{}
			}
			products[sku][r.ProductID] = true
		}
	}
	for sku, ids := range products {
		if len(ids) != 1 || ids[""] {
			t.Errorf("race: the rows of %s name products %v, want one", sku, ids)
		}
	}
	t.Logf("race: upload 1 %d registered / %d already, upload 2 %d / %d",
		race[0].Registered, race[0].AlreadyRegistered, race[1].Registered, race[1].AlreadyRegistered)

	// ── Re-upload: 40 rows, 4 bad prices; then the whole file fixed.
	rows := make([]sheetRow, 40)
	for i := range rows {
		rows[i] = sheetRow{fmt.Sprintf("FIX-%02d", i), strconv.Itoa(2000 + i)}
	}
	bad := append([]sheetRow(nil), rows...)
	for _, i := range []int{3, 11, 22, 37} {
		bad[i].price = "12,000원"
	}
	r := producerCLI(t, bin, env, "upload", "--seller", "seller-fix", "--wait", writeSheet(t, "products.xlsx", bad))
	if r.code != 1 || !strings.Contains(r.stderr, "36 registered, 0 already registered, 4 failed of 40 rows") {
		t.Fatalf("first upload --wait: exit %d, want 1 with 36 registered and 4 failed:\n%s", r.code, testbin.Tail(r.stderr, 12))
	}
	r = producerCLI(t, bin, env, "upload", "--seller", "seller-fix", "--wait", writeSheet(t, "products-fixed.xlsx", rows))
	if r.code != 0 || !strings.Contains(r.stderr, "4 rows published, 36 rows registered before and not sent again") {
		t.Fatalf("second upload --wait: exit %d, want 0 with 4 published and 36 registered before:\n%s", r.code, testbin.Tail(r.stderr, 12))
	}
	second := statusOf(t, bin, env, strings.TrimSpace(r.stdout))
	if second.AlreadyRegistered != 36 || second.Registered != 4 || second.Failed != 0 || second.Waiting != 0 {
		t.Errorf("second upload's status: %d already registered, %d registered, %d failed, %d waiting; want 36, 4, 0, 0",
			second.AlreadyRegistered, second.Registered, second.Failed, second.Waiting)
	}
	if a := audit("seller-fix"); a.Products != 40 || a.Accepted != 40 || a.RateLimited != 0 {
		t.Errorf("re-upload: the sandbox counts %d products, %d registrations, %d × 429; want 40, 40, 0", a.Products, a.Accepted, a.RateLimited)
	}
	out := producerCLI(t, bin, env, "status", strings.TrimSpace(r.stdout))
	if !strings.Contains(out.stdout, "40 rows: 4 registered, 36 already registered, 0 failed, 0 waiting") {
		t.Errorf("producer status: %s", out.stdout)
	}

	// ── Forms: the same 10 products typed in NFC and pasted in NFD (as from a
	// Mac), uploaded at once, and in the NFC file "ZW-002" with three
	// look-alikes holding U+200D, U+2060 and U+200C. Each product is
	// registered once; the look-alikes are refused on their cells.
	var nfcRows, nfdRows []sheetRow
	for i := range 10 {
		sku := fmt.Sprintf("가방-%03d", i)
		nfcRows = append(nfcRows, sheetRow{sku, strconv.Itoa(3000 + i)})
		nfdRows = append(nfdRows, sheetRow{norm.NFD.String(sku), strconv.Itoa(3000 + i)})
	}
	nfcRows = append(nfcRows, sheetRow{"ZW-002", "4000"}, sheetRow{"ZW-\u200d002", "4000"}, sheetRow{"ZW-\u2060002", "4000"}, sheetRow{"ZW-\u200c002", "4000"})
	formIDs := make([]string, 2)
	for i, rows := range [][]sheetRow{nfcRows, nfdRows} {
		wg.Go(func() {
			r := producerCLI(t, bin, env, "upload", "--seller", "seller-forms", writeSheet(t, fmt.Sprintf("forms-%d.xlsx", i), rows))
			formIDs[i] = strings.TrimSpace(r.stdout)
			if formIDs[i] == "" {
				t.Errorf("forms upload %d: exit %d, no upload id: %s", i, r.code, r.stderr)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	var forms [2]uploadstatus.Status
	testwait.For(t, 60*time.Second, "both form uploads done", func() bool {
		for i, id := range formIDs {
			forms[i] = statusOf(t, bin, env, id)
		}
		return forms[0].Done() && forms[1].Done()
	})
	if a := audit("seller-forms"); a.Products != 11 || a.Accepted != 11 {
		t.Errorf("forms: the sandbox counts %d products in %d registrations; want 11 and 11 (10 products in two forms, ZW-002)", a.Products, a.Accepted)
	}
	if reg, already, failed := forms[0].Registered+forms[1].Registered, forms[0].AlreadyRegistered+forms[1].AlreadyRegistered, forms[0].Failed+forms[1].Failed; reg != 11 || already != 10 || failed != 3 {
		t.Errorf("forms: %d rows registered, %d already registered, %d failed over both uploads; want 11, 10, 3", reg, already, failed)
	}
	for _, r := range forms[0].Rows {
		if r.Row >= 13 && (r.State != uploadstatus.Failed || !strings.Contains(r.Reason, "invisible character U+")) {
			t.Errorf("forms: row %d (%+q) is %s %q, want failed naming the invisible character", r.Row, nfcRows[r.Row-2].sku, r.State, r.Reason)
		}
	}
}
