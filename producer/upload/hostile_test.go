package upload

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/excel"
	"github.com/bulkreg/bulkreg/internal/hostile"
)

// The cost ceiling of one upload of at most 10 MiB (design.md).
const (
	ceilingCPU    = time.Second
	ceilingRSS    = 64 << 20
	ceilingRedis  = 8 << 20
	ceilingAnswer = 1 << 20
)

// hostileOutcomes is what each file of the hostile corpus
// (testdata/hostile, go run ./testdata/hostile/gen) comes to: the code
// that refuses it, or "rows/valid" of an accepted file.
var hostileOutcomes = map[string]string{
	"merges-10000.xlsx":              "500/0",
	"merges-1000.xlsx":               "500/0",
	"merges-distinct.xlsx":           "500/0",
	"merges-vertical.xlsx":           "500/1",
	"sst-13m-empty.xlsx":             excel.CodeTooLarge,
	"styles-13m-xf.xlsx":             excel.CodeTooLarge,
	"docprops-149k-attrs.xlsx":       "5/5",
	"workbook-149k-attrs.xlsx":       excel.CodeDamaged,
	"rels-1m.xlsx":                   excel.CodeTooLarge,
	"sheets-1m.xlsx":                 excel.CodeTooLarge,
	"numfmts-200k.xlsx":              excel.CodeTooLarge,
	"sheet-13m-empty-elements.xlsx":  excel.CodeTooLarge,
	"sheet-1m-empty-rows.xlsx":       "5/5",
	"sheet-wide-rows.xlsx":           excel.CodeTooLarge,
	"sheet-many-attrs-cells.xlsx":    excel.CodeTooLarge,
	"sheet-deep-nesting.xlsx":        excel.CodeDamaged,
	"sheet-comments.xlsx":            excel.CodeTooLarge,
	"sheet-entities.xlsx":            "6/5",
	"sheet-long-cell.xlsx":           "6/5",
	"sheet-long-formula.xlsx":        "495/5",
	"sheet-huge-numbers.xlsx":        "500/0",
	"sheet-every-cell-bad.xlsx":      "500/0",
	"sheet-hidden-500.xlsx":          "500/500",
	"sst-long-strings.xlsx":          excel.CodeTooLarge,
	"sst-expansion.xlsx":             excel.CodeTooLarge,
	"xml-utf16-part.xlsx":            excel.CodeDamaged,
	"zip-9999-entries.xlsx":          "5/5",
	"zip-20000-entries.xlsx":         excel.CodeTooLarge,
	"zip-bomb-docprops.xlsx":         "5/5",
	"zip-bomb-sheet-lying.xlsx":      excel.CodeDamaged,
	"zip-declared-huge.xlsx":         excel.CodeTooLarge,
	"zip-duplicate-names.xlsx":       excel.CodeDamaged,
	"zip-stored-60mib.xlsx":          excel.CodeDamaged,
	"csv-every-cell-bad.csv":         "500/0",
	"csv-10mib-line.csv":             excel.CodeNoRows,
	"csv-10mib-cell.csv":             "1/0",
	"csv-quote-never-closed.csv":     excel.CodeDamaged,
	"csv-5m-lines.csv":               excel.CodeDamaged,
	"csv-2m-tiny-rows.csv":           excel.CodeTooManyRows,
	"csv-wide.csv":                   "500/0",
	"csv-no-header-10mib.csv":        excel.CodeNoHeader,
	"csv-cp949-10mib.csv":            excel.CodeNotXLSX,
	"tsv-utf16-surrogates.txt":       "1/0",
	"tsv-utf16be-lone-surrogate.txt": excel.CodeNotXLSX,
	"csv-bom-then-binary.csv":        excel.CodeNotXLSX,
	"csv-formula-cells.csv":          "500/0",
	"sst-index-huge.xlsx":            excel.CodeDamaged,
	"sheet-huge-refs.xlsx":           excel.CodeDamaged,
	"csv-quoted-rows.csv":            excel.CodeTooManyRows,
	"csv-one-char.csv":               "1/0",
	"csv-cp949-invalid.csv":          excel.CodeNotXLSX,
	"zip-method-deflate64.xlsx":      excel.CodeDamaged,
	"sheets-9990-no-header.xlsx":     excel.CodeNoHeader,
	"sheets-9990-far-cell.xlsx":      excel.CodeNoHeader,
	"rels-outside.xlsx":              excel.CodeDamaged,
	// What the answers repeat (producer/httpapi's
	// TestHostileAnswersUnderTheCeiling renders every answer of them).
	"csv-header-attack.csv":          excel.CodeMissingColumn,
	"sheet-header-attack.xlsx":       excel.CodeMissingColumn,
	"csv-256-unknown-columns.csv":    "500/500",
	"csv-long-headers-bad-cells.csv": "500/0",
}

// hostileDir is the hostile corpus (go run ./testdata/hostile/gen writes it).
var hostileDir = filepath.Join("..", "..", "testdata", "hostile")

// checkAnswer and uploadAnswer are the JSON answers of POST
// /v1/uploads?dry_run=true and POST /v1/uploads as producer/httpapi builds
// them; refusalAnswer is its problem document.
type checkAnswer struct {
	DryRun            bool      `json:"dry_run"`
	Total             int       `json:"total"`
	Valid             int       `json:"valid"`
	Invalid           int       `json:"invalid"`
	AlreadyRegistered int       `json:"already_registered"`
	Problems          []Problem `json:"problems"`
	Warnings          []Problem `json:"warnings"`
}

type uploadAnswer struct {
	UploadID          string    `json:"upload_id"`
	Duplicate         bool      `json:"duplicate"`
	State             string    `json:"state"`
	Total             int       `json:"total"`
	Published         int       `json:"published"`
	Invalid           int       `json:"invalid"`
	AlreadyRegistered int       `json:"already_registered"`
	Problems          []Problem `json:"problems,omitempty"`
	Warnings          []Problem `json:"warnings,omitempty"`
	StatusURL         string    `json:"status_url"`
}

type refusalAnswer struct {
	Type     string    `json:"type"`
	Title    string    `json:"title"`
	Status   int       `json:"status"`
	Detail   string    `json:"detail,omitempty"`
	Instance string    `json:"instance,omitempty"`
	Code     string    `json:"code"`
	Problems []Problem `json:"problems,omitempty"`
}

func jsonLen(t testing.TB, v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// TestHostileCorpusUnderTheCeiling runs every file of the hostile corpus
// through a check and a real upload (redis-server, the embedded Kafka
// broker) with the production defaults, and holds each to the ceiling:
// at most 1 s of CPU for the check and for the upload, 64 MiB of RSS
// growth, 8 MiB in Redis and 1 MiB of answer. Without the bounds that
// hold it there, merges-10000.xlsx alone costs seconds of CPU, gigabytes of
// RSS and hundreds of MB in Redis and in its answer (bench/HISTORY.md has
// the figures; go run ./bench/hostile measures the corpus).
func TestHostileCorpusUnderTheCeiling(t *testing.T) {
	names, err := hostile.Names(hostileDir)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, nil, WriterOptions{})
	ctx := context.Background()
	for name := range hostileOutcomes {
		if !slices.Contains(names, name) {
			t.Errorf("%s: not in testdata/hostile; run go run ./testdata/hostile/gen", name)
		}
	}
	i := 0
	for _, name := range names {
		want, ok := hostileOutcomes[name]
		if !ok {
			t.Errorf("%s: no outcome in hostileOutcomes; add what it comes to", name)
			continue
		}
		// One file in memory at a time: the whole corpus held would let
		// the collector leave that much garbage, and the RSS growth
		// measured below would be the collector's pacing, not the
		// upload's (the bench runs a process per file).
		data, err := hostile.Load(hostileDir, name)
		if err != nil {
			t.Fatal(err)
		}
		i++
		seller := "hostile-" + strconv.Itoa(i)
		var chk *Checked
		var cerr error
		var checkCPU time.Duration
		growth := hostile.PeakRSS(func() {
			c0 := hostile.CPU()
			chk, cerr = e.up.Check(ctx, seller, data)
			checkCPU = hostile.CPU() - c0
		})
		var res Result
		var uerr error
		var uploadCPU time.Duration
		growth = max(growth, hostile.PeakRSS(func() {
			c0 := hostile.CPU()
			res, uerr = e.up.Upload(ctx, Request{SellerID: seller, FileName: name, Data: data})
			uploadCPU = hostile.CPU() - c0
		}))

		got, checkBytes, uploadBytes := "", 0, 0
		if ref, ok := Refused(cerr); ok {
			got = ref.Code
			checkBytes = jsonLen(t, refusalAnswer{Type: "urn:bulkreg:problem:" + ref.Code, Title: "Unprocessable Entity", Status: 422, Code: ref.Code,
				Detail: ref.Message, Instance: "/v1/uploads", Problems: ref.Problems})
		} else if cerr != nil {
			t.Errorf("%s: check: %v", name, cerr)
			continue
		} else {
			got = fmt.Sprintf("%d/%d", len(chk.Rows), chk.Valid)
			checkBytes = jsonLen(t, checkAnswer{DryRun: true, Total: len(chk.Rows), Valid: chk.Valid, Invalid: chk.Invalid,
				AlreadyRegistered: chk.AlreadyRegistered, Problems: chk.Problems, Warnings: chk.Warnings})
		}
		if ref, ok := Refused(uerr); ok {
			if ref.Code != got {
				t.Errorf("%s: the upload was refused as %s, the check said %s", name, ref.Code, got)
			}
			uploadBytes = jsonLen(t, refusalAnswer{Type: "urn:bulkreg:problem:" + ref.Code, Title: "Unprocessable Entity", Status: 422, Code: ref.Code,
				Detail: ref.Message, Instance: "/v1/uploads", Problems: ref.Problems})
		} else if uerr != nil {
			t.Errorf("%s: upload: %v", name, uerr)
			continue
		} else {
			a := uploadAnswer{UploadID: res.UploadID, State: res.Upload.State, Total: res.Upload.Total, Published: res.Published,
				Invalid: res.Invalid, AlreadyRegistered: res.AlreadyRegistered, StatusURL: "/v1/uploads/" + res.UploadID,
				Warnings: Problems(res.Sheet.Warnings)}
			for _, row := range res.Sheet.Rows {
				a.Problems = append(a.Problems, Problems(row.Problems)...)
			}
			uploadBytes = jsonLen(t, a)
			if want := fmt.Sprintf("%d/%d", len(res.Sheet.Rows), res.Sheet.Valid()); want != got {
				t.Errorf("%s: the upload read %s, the check %s", name, want, got)
			}
		}
		var redisBytes int64
		if res.UploadID != "" {
			for _, part := range []string{"meta", "states", "rows", "cells"} {
				n, err := e.rdb.MemoryUsage(ctx, "bulkreg:upload:{"+res.UploadID+"}:"+part, 0).Result()
				if err == nil {
					redisBytes += n
				}
			}
		}
		t.Logf("%-32s %-14s check %4d ms CPU, upload %4d ms CPU, RSS +%5.1f MiB, Redis %8d B, answers %7d / %7d B",
			name, got, checkCPU.Milliseconds(), uploadCPU.Milliseconds(), float64(growth)/(1<<20), redisBytes, checkBytes, uploadBytes)
		if got != want {
			t.Errorf("%s: came to %s, want %s", name, got, want)
		}
		if checkCPU > ceilingCPU || uploadCPU > ceilingCPU {
			t.Errorf("%s: %v of CPU to check, %v to upload; the ceiling is %v", name, checkCPU, uploadCPU, ceilingCPU)
		}
		if growth > ceilingRSS {
			t.Errorf("%s: RSS grew %d MiB; the ceiling is %d MiB", name, growth>>20, ceilingRSS>>20)
		}
		if redisBytes > ceilingRedis {
			t.Errorf("%s: %d bytes in Redis; the ceiling is %d", name, redisBytes, ceilingRedis)
		}
		if checkBytes > ceilingAnswer || uploadBytes > ceilingAnswer {
			t.Errorf("%s: answers of %d and %d bytes; the ceiling is %d", name, checkBytes, uploadBytes, ceilingAnswer)
		}
	}
}
