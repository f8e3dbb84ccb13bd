package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/bulkreg/bulkreg/internal/hostile"
	"github.com/bulkreg/bulkreg/producer/upload"
)

// countingBody counts the bytes the server reads of a request's body.
type countingBody struct {
	r io.Reader
	n int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// hostileForm is a multipart body of about size bytes shaped by each:
// every part's header and content before the file.
func hostileForm(boundary string, size int, part func(i int) string) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < size; i++ {
		b.WriteString("--" + boundary + "\r\n" + part(i))
	}
	b.WriteString("--" + boundary + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.csv\"\r\n\r\nx\r\n--" + boundary + "--\r\n")
	return b.Bytes()
}

// TestMultipartFormIsBounded: a form of 10 MiB of part headers (one part
// with 10,000 long headers, 500,000 empty fields, fields of many headers)
// is refused after the first 64 KiB and 16 parts, 413 or 400 with a code
// that says what to send, without the rest being read: the server must not
// read the whole body only to answer "no field file".
func TestMultipartFormIsBounded(t *testing.T) {
	s := &Server{Uploader: &upload.Uploader{}, Auth: Auth{Secret: secret}}
	h := s.Handler()
	const boundary = "b0undary"
	long := strings.Repeat("a", 1000)
	for _, tc := range []struct {
		name   string
		body   []byte
		status int
		code   string
	}{
		{"one part with 10 MiB of headers", hostileForm(boundary, 1, func(i int) string {
			var b strings.Builder
			b.WriteString("Content-Disposition: form-data; name=\"x\"\r\n")
			for j := 0; j < 10000; j++ {
				b.WriteString("X-H: " + long + "\r\n")
			}
			return b.String() + "\r\nv\r\n"
		}), http.StatusRequestEntityTooLarge, "form_too_large"},
		{"500,000 empty fields", hostileForm(boundary, 10<<20, func(int) string { return "\r\n\r\n" }),
			http.StatusBadRequest, "too_many_fields"},
		{"fields of 100 short headers", hostileForm(boundary, 10<<20, func(i int) string {
			return strings.Repeat("X: y\r\n", 100) + "Content-Disposition: form-data; name=\"f\"\r\n\r\nv\r\n"
		}), http.StatusBadRequest, "too_many_fields"},
		{"one field of 1 MiB before the file", hostileForm(boundary, 1, func(int) string {
			return "Content-Disposition: form-data; name=\"note\"\r\n\r\n" + strings.Repeat("n", 1<<20) + "\r\n"
		}), http.StatusRequestEntityTooLarge, "form_too_large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := &countingBody{r: bytes.NewReader(tc.body)}
			req := httptest.NewRequest("POST", "/v1/uploads", body)
			req.Header.Set("Authorization", "Bearer "+token(t, "seller-a"))
			req.Header.Set("Content-Type", "multipart/form-data; boundary="+boundary)
			w := httptest.NewRecorder()
			c0, t0 := hostile.CPU(), time.Now()
			h.ServeHTTP(w, req)
			cpu, wall := hostile.CPU()-c0, time.Since(t0)
			var p problem
			_ = json.Unmarshal(w.Body.Bytes(), &p)
			t.Logf("%d bytes sent: %d read, %v CPU, %v; %d %s", len(tc.body), body.n, cpu.Round(time.Microsecond), wall.Round(time.Microsecond), w.Code, p.Code)
			if w.Code != tc.status || p.Code != tc.code || !strings.Contains(p.Detail, `"file"`) {
				t.Errorf("answered %d %s %q, want %d %s saying what to send", w.Code, p.Code, p.Detail, tc.status, tc.code)
			}
			if body.n > formBudget+16<<10 {
				t.Errorf("the server read %d bytes of the form before refusing it; the budget is %d", body.n, formBudget)
			}
		})
	}
	// A form as the pages send it (three fields, then the file) still works.
	var b bytes.Buffer
	for _, f := range [][2]string{{"csrf_token", "t"}, {"confirmed", "1"}, {"lang", "ko"}} {
		b.WriteString("--" + boundary + "\r\nContent-Disposition: form-data; name=\"" + f[0] + "\"\r\n\r\n" + f[1] + "\r\n")
	}
	b.Write(hostileForm(boundary, 0, nil))
	r := httptest.NewRequest("POST", "/v1/uploads", &b)
	r.Header.Set("Content-Type", "multipart/form-data; boundary="+boundary)
	f, err := s.readFile(r, boundary)
	if err != nil || string(f.data) != "x" || f.csrf != "t" || f.confirmed != "1" {
		t.Errorf("a form of three fields and the file: %+v, %v", f, err)
	}
}
