package registryclient

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"strconv"
	"strings"
	"time"
)

// A registration through net/http's Client, even over the synchronous
// transport, builds and parses the request and the answer as general HTTP:
// a URL parsed for each call, a header map cloned, every answer header
// canonicalised into a map, a context and its timer per call. That is
// three quarters of the client's CPU per call and 58 allocations
// (BenchmarkRegisterTransport). The registration is one fixed request shape
// to one host, so post writes it directly and reads of the answer only what
// Register needs, with the same rules as net/http for where the answer
// ends (RFC 9112 §6.3) and the same refusals (a length given twice and
// differently, a transfer coding it cannot read).

// field is one request header, its name canonical and its value checked.
type field struct{ name, value string }

// answer is what post read of an answer: its status, the header fields
// classify reads (only for an answer other than 2xx) and its body, of which
// at most maxAnswer bytes.
type answer struct {
	status int
	header http.Header
	body   []byte
	// cut: the body was longer than maxAnswer; the rest is not read.
	cut bool
}

// badAnswer is an answer that is not HTTP/1.x as net/http reads it: the
// API (or whatever answers at its address) spoke, but not so that bulkreg
// can tell what it said. transportError says so instead of "cannot be
// reached".
type badAnswer struct {
	msg string
	// format, when set, quotes line, which the answer sent (its %q verb):
	// the line is cut and its secrets hidden only when the error is shown,
	// by secrets, which the client sets (Client.failed) before the error
	// leaves it.
	format  string
	line    string
	secrets secrets
}

func (e *badAnswer) Error() string {
	if e.format == "" {
		return e.msg
	}
	return fmt.Sprintf(e.format, e.secrets.line(e.line))
}

func malformed(format string, args ...any) error {
	return &badAnswer{msg: fmt.Sprintf(format, args...)}
}

// malformedLine is a badAnswer that quotes (with format's %q) the start of
// a line the answer sent. More than maxLine bytes are kept, so that a secret
// cut by maxLine is still found whole and hidden; a longer one is dropped
// by the cut.
func malformedLine(format string, line []byte) error {
	return &badAnswer{format: format, line: string(line[:min(len(line), maxKeptLine)])}
}

// maxKeptLine is how much of a malformed line a badAnswer keeps.
const maxKeptLine = 4 << 10

// errHeaderTooLarge ends an answer whose header is longer than anything the
// contract's answers or a proxy's error page would send.
var errHeaderTooLarge error = &badAnswer{msg: "the answer's header is larger than 1 MiB"}

const maxAnswerHeader = 1 << 20

// post sends one POST of a JSON body to path (escaped, from the root) and
// reads its answer. It ends by deadline at the latest, and when ctx ends. A
// failure before the answer's status line has status 0; a failure while
// reading the body keeps the status, so the caller can say which.
func (t *syncTransport) post(ctx context.Context, deadline time.Time, path string, fields []field, body []byte) (answer, error) {
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c, err := t.conn(ctx, deadline)
	if err != nil {
		return answer{}, err
	}
	if err := c.nc.SetDeadline(deadline); err != nil {
		t.discard(c)
		return answer{}, err
	}
	// Cancellation has no deadline to set in advance: a deadline in the
	// past makes the blocked read or write return at once. The connection
	// is then in an unknown state and is closed, never reused.
	stop := func() bool { return true }
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(time.Unix(1, 0)) })
	}
	a, keep, err := t.exchangeBytes(c, path, fields, body)
	// stop is false when ctx ended: its deadline in the past is set or
	// about to be, on a connection that must then not serve another call.
	// Bytes already buffered past the answer are not an answer to the next
	// request.
	if stop() && err == nil && keep && c.br.Buffered() == 0 {
		t.put(c)
	} else {
		t.discard(c)
	}
	if err != nil {
		return a, endedError(ctx, err)
	}
	return a, nil
}

// conn is an idle connection that looks alive, or one from get, which may
// dial or wait for another call's and is bounded by deadline.
func (t *syncTransport) conn(ctx context.Context, deadline time.Time) (*conn, error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	if c := t.idleConn(); c != nil {
		return c, nil
	}
	if d, ok := ctx.Deadline(); ok && !d.After(deadline) {
		// The caller's deadline is the call's: its end is what the caller
		// must read, not a timer of the call's own firing at the same time.
		return t.get(ctx)
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	return t.get(ctx)
}

func (t *syncTransport) exchangeBytes(c *conn, path string, fields []field, body []byte) (a answer, keep bool, err error) {
	w := c.bw
	_, _ = w.WriteString("POST ")
	_, _ = w.WriteString(path)
	_, _ = w.WriteString(" HTTP/1.1\r\nHost: ")
	_, _ = w.WriteString(t.host)
	_, _ = w.WriteString("\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: ")
	_, _ = w.Write(strconv.AppendInt(c.scratch[:0], int64(len(body)), 10))
	for _, f := range fields {
		_, _ = w.WriteString("\r\n")
		_, _ = w.WriteString(f.name)
		_, _ = w.WriteString(": ")
		_, _ = w.WriteString(f.value)
	}
	_, _ = w.WriteString("\r\n\r\n")
	_, _ = w.Write(body)
	if err := w.Flush(); err != nil {
		return answer{}, false, err
	}
	return readAnswer(c.br)
}

// readAnswer reads one answer to a POST: informational answers skipped (at
// most max1xx), then the final one's header and body. keep is whether the
// connection may carry another request.
func readAnswer(br *bufio.Reader) (a answer, keep bool, err error) {
	var h head
	for n := 0; ; n++ {
		h, err = readHead(br)
		if err != nil {
			return answer{}, false, err
		}
		if h.status >= 200 {
			break
		}
		if h.status == http.StatusSwitchingProtocols || n == max1xx {
			return answer{}, false, malformed("unexpected %d from the registration API", h.status)
		}
	}
	a = answer{status: h.status, header: h.header}
	keep = h.keep
	switch {
	case h.status == http.StatusNoContent || h.status == http.StatusNotModified:
		// No body, whatever the header says.
	case h.chunked:
		a.body, a.cut, err = readAtMost(httputil.NewChunkedReader(br), -1)
		if err == nil && !a.cut {
			err = skipTrailer(br)
		}
		keep = keep && !a.cut
	case h.length >= 0:
		a.body, a.cut, err = readAtMost(br, h.length)
		keep = keep && !a.cut
	default:
		// Neither a length nor chunks: the body ends when the server closes.
		a.body, a.cut, err = readAtMost(br, -1)
		keep = false
	}
	if err != nil {
		return a, false, err
	}
	return a, keep, nil
}

// readAtMost reads a body of length n (-1: up to its end) and keeps at most
// maxAnswer bytes of it; cut says that more followed, left unread.
func readAtMost(r io.Reader, n int64) (body []byte, cut bool, err error) {
	want := int64(maxAnswer)
	if n >= 0 && n <= want {
		want = n
	}
	if want == 0 {
		return nil, false, nil
	}
	if n >= 0 {
		body = make([]byte, want)
		if _, err := io.ReadFull(r, body); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, false, err
		}
		return body, n > want, nil
	}
	body, err = io.ReadAll(io.LimitReader(r, want+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(body)) > want {
		return body[:want], true, nil
	}
	return body, false, nil
}

// skipTrailer reads the trailer section that ends a chunked body, bounded
// as net/http bounds it: fields must end within the read buffer (4 KiB).
func skipTrailer(br *bufio.Reader) error {
	buf, _ := br.Peek(2)
	if len(buf) < 2 {
		return io.ErrUnexpectedEOF
	}
	if buf[0] == '\r' && buf[1] == '\n' {
		_, _ = br.Discard(2)
		return nil
	}
	if !upcomingEnd(br) {
		return malformed("the answer's trailer after its chunks is cut or longer than 4 KiB")
	}
	size := 0
	for first := true; ; first = false {
		line, err := readLine(br, &size)
		if err != nil {
			return err
		}
		if len(line) == 0 {
			return nil
		}
		if line[0] == ' ' || line[0] == '\t' {
			if first || !validFieldValue(line) {
				return malformedLine("malformed trailer line %q from the registration API", line)
			}
			continue
		}
		k, v, ok := bytes.Cut(line, []byte{':'})
		if !ok || !tokenBytes(k) || !validFieldValue(v) {
			return malformedLine("malformed trailer line %q from the registration API", line)
		}
	}
}

// upcomingEnd reports whether the buffered bytes ahead hold the CRLF CRLF
// that ends a field section.
func upcomingEnd(br *bufio.Reader) bool {
	for n := 4; n <= br.Size(); n++ {
		buf, err := br.Peek(n)
		if bytes.HasSuffix(buf, []byte("\r\n\r\n")) {
			return true
		}
		if err != nil {
			return false
		}
	}
	return false
}

// head is what readHead took from a status line and its header fields.
type head struct {
	status  int
	keep    bool
	chunked bool
	length  int64 // -1 when not given
	header  http.Header
}

// readHead reads a status line and its header fields.
func readHead(br *bufio.Reader) (h head, err error) {
	size := 0
	line, err := readLine(br, &size)
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return head{}, err
	}
	proto, rest, _ := bytes.Cut(line, []byte{' '})
	var http10 bool
	switch string(proto) {
	case "HTTP/1.1":
	case "HTTP/1.0":
		http10 = true
	default:
		return head{}, malformedLine("malformed status line %q from the registration API", line)
	}
	code, _, _ := bytes.Cut(rest, []byte{' '})
	if len(code) != 3 || code[0] < '1' || code[0] > '5' || !digits(code) {
		return head{}, malformedLine("malformed status line %q from the registration API", line)
	}
	h = head{status: int(code[0]-'0')*100 + int(code[1]-'0')*10 + int(code[2]-'0'), keep: !http10, length: -1}
	lengthSeen := false
	var last string // the field a continuation line (obs-fold) adds to
	for {
		line, err := readLine(br, &size)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return head{}, err
		}
		if len(line) == 0 {
			break
		}
		var name string
		var value []byte
		folded := line[0] == ' ' || line[0] == '\t'
		if folded {
			// obs-fold (RFC 9112 §5.2): part of the last field's value.
			if last == "" {
				return head{}, malformedLine("malformed header line %q from the registration API", line)
			}
			name, value = last, bytes.Trim(line, " \t")
		} else {
			k, v, ok := bytes.Cut(line, []byte{':'})
			if !ok || !tokenBytes(k) {
				return head{}, malformedLine("malformed header line %q from the registration API", line)
			}
			name, value = canonicalName(k), bytes.Trim(v, " \t")
			last = name
		}
		if !validFieldValue(value) {
			return head{}, malformedLine("malformed header line %q from the registration API", line)
		}
		switch name {
		case "Content-Length":
			n, err := strconv.ParseInt(string(value), 10, 64)
			if err != nil || n < 0 || !digits(value) {
				return head{}, malformedLine("the registration API answered a bad Content-Length %q", value)
			}
			if lengthSeen && n != h.length {
				return head{}, malformed("the registration API answered two different Content-Lengths (%d and %d)", h.length, n)
			}
			h.length, lengthSeen = n, true
		case "Transfer-Encoding":
			// net/http reads "chunked" alone and refuses any other coding;
			// an HTTP/1.0 answer has no transfer codings (RFC 9112 §6.1).
			if http10 {
				break
			}
			if !asciiEqualFold(value, "chunked") {
				return head{}, malformedLine("the registration API answered a transfer coding it cannot read: %q", value)
			}
			h.chunked = true
		case "Connection":
			for _, tok := range bytes.Split(value, []byte{','}) {
				tok = bytes.TrimSpace(tok)
				switch {
				case asciiEqualFold(tok, "close"):
					h.keep = false
				case http10 && asciiEqualFold(tok, "keep-alive"):
					h.keep = true
				}
			}
		}
		if h.status >= 300 {
			// Only a refusal's fields are read (Retry-After, the 429's
			// scope, a redirect's Location); a success or a 1xx needs none.
			h.keepField(name, value, folded)
		}
	}
	if h.chunked {
		h.length = -1 // chunks say where the body ends; a length beside them is ignored
	}
	return h, nil
}

// keepField adds a field's value to h.header; folded, the value goes on
// the field's last one, after a space as net/http joins them.
func (h *head) keepField(name string, value []byte, folded bool) {
	if h.header == nil {
		h.header = make(http.Header)
	}
	vs := h.header[name]
	switch {
	case !folded || len(vs) == 0:
		h.header[name] = append(vs, string(value))
	case vs[len(vs)-1] == "":
		vs[len(vs)-1] = string(value)
	default:
		vs[len(vs)-1] += " " + string(value)
	}
}

// readLine reads one line without its CRLF (or LF), counting its bytes in
// *size against maxAnswerHeader. A line longer than the buffer is joined.
func readLine(br *bufio.Reader, size *int) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		long := append([]byte(nil), line...)
		for err == bufio.ErrBufferFull {
			if len(long) > maxAnswerHeader {
				return nil, errHeaderTooLarge
			}
			line, err = br.ReadSlice('\n')
			long = append(long, line...)
		}
		line = long
	}
	*size += len(line)
	if *size > maxAnswerHeader {
		return nil, errHeaderTooLarge
	}
	if err != nil {
		if err == io.EOF && len(line) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// canonicalName is textproto's canonical form, without an allocation for
// the names bulkreg reads.
func canonicalName(k []byte) string {
	for _, known := range [...]string{"Content-Length", "Content-Type", "Transfer-Encoding", "Connection", "Date", "Retry-After", "Location", ScopeHeader} {
		if asciiEqualFold(k, known) {
			return known
		}
	}
	return textproto.CanonicalMIMEHeaderKey(string(k))
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// tokenBytes is RFC 9110's token, what a field name is made of.
func tokenBytes(b []byte) bool {
	for _, c := range b {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return len(b) > 0
}

func digits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

// validFieldValue is net/http's rule for a header value it sends: no
// control character but tab.
func validFieldValue[T string | []byte](v T) bool {
	for i := range len(v) {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// requestPath is the escaped path of a seller's registrations.
func requestPath(base, seller string) string {
	var b strings.Builder
	b.Grow(len(base) + len(seller) + len("/v1/sellers//products"))
	b.WriteString(base)
	b.WriteString("/v1/sellers/")
	b.WriteString(seller) // ValidSellerID allows nothing that needs escaping
	b.WriteString("/products")
	return b.String()
}
