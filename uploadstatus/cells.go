package uploadstatus

import (
	"bytes"
	"compress/flate"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// cellsField is the field of an upload's cells hash that holds every row's
// cells in one blob.
const cellsField = "z"

// maxCellsJSON bounds what readCellsBlob inflates: the producer keeps at
// most a few MiB of cells (upload.DefaultMaxReportCellBytes), so a blob
// that inflates past this is not one Create wrote.
const maxCellsJSON = 64 << 20

// cellsBlob is how Create keeps an upload's cells: one JSON object, row
// number → the row's cells, compressed with DEFLATE. The rows of one file
// repeat one another (a brand, a category, a description's template), so
// the whole file compresses several times better than each row alone: 500
// rows of short cells take 4 KB where their JSON takes 76 KB, and Redis
// keeps one field, not one per row.
func cellsBlob(cells map[int][]string) (string, error) {
	obj := make(map[string][]string, len(cells))
	for row, c := range cells {
		obj[strconv.Itoa(row)] = c
	}
	js, err := json.Marshal(obj)
	if err != nil {
		return "", fmt.Errorf("encode the cells: %w", err)
	}
	var buf bytes.Buffer
	buf.Grow(len(js) / 4)
	zw, err := flate.NewWriter(&buf, flate.DefaultCompression)
	if err != nil {
		return "", err
	}
	if _, err := zw.Write(js); err != nil {
		return "", fmt.Errorf("compress the cells: %w", err)
	}
	if err := zw.Close(); err != nil {
		return "", fmt.Errorf("compress the cells: %w", err)
	}
	return buf.String(), nil
}

// readCellsBlob adds the rows of a cellsBlob to out.
func readCellsBlob(blob string, out map[int][]string) error {
	zr := flate.NewReader(strings.NewReader(blob))
	defer zr.Close()
	js, err := io.ReadAll(io.LimitReader(zr, maxCellsJSON+1))
	if err != nil {
		return fmt.Errorf("the stored cells do not decompress: %w", err)
	}
	if len(js) > maxCellsJSON {
		return fmt.Errorf("the stored cells inflate past %d bytes", maxCellsJSON)
	}
	var obj map[string][]string
	if err := json.Unmarshal(js, &obj); err != nil {
		return fmt.Errorf("the stored cells are not readable: %w", err)
	}
	for k, c := range obj {
		if row, err := strconv.Atoi(k); err == nil {
			out[row] = c
		}
	}
	return nil
}
