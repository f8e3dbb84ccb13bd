// Parsing the scripts' replies into Decision and Status.

package circuit

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// parse helpers: the scripts answer µs timestamps as strings (exact, where a
// Lua number could be rounded) and counts as integers.

func micros(v any) (int64, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("want a string of µs, got %T", v)
	}
	return strconv.ParseInt(s, 10, 64)
}

func str(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("want a string, got %T", v)
	}
	return s, nil
}

func integer(v any) (int64, error) {
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("want an integer, got %T", v)
	}
	return n, nil
}

func since(opened, now int64) time.Duration {
	if opened <= 0 || now < opened {
		return 0
	}
	return time.Duration(now-opened) * time.Microsecond
}

func parseDecision(v []any) (Decision, error) {
	if len(v) != 6 {
		return Decision{}, fmt.Errorf("the allow script answered %d values, want 6", len(v))
	}
	s, err1 := str(v[0])
	allowed, err2 := integer(v[1])
	probe, err3 := integer(v[2])
	retry, err4 := micros(v[3])
	now, err5 := micros(v[4])
	opened, err6 := micros(v[5])
	if err := errors.Join(err1, err2, err3, err4, err5, err6); err != nil {
		return Decision{}, fmt.Errorf("the allow script answered %v: %w", v, err)
	}
	state, err := parseState(s)
	if err != nil {
		return Decision{}, err
	}
	d := Decision{State: state, Allowed: allowed == 1, Probe: probe == 1, RetryAt: time.UnixMicro(retry), OpenFor: since(opened, now), at: time.UnixMicro(now)}
	if retry > now {
		d.Wait = time.Duration(retry-now) * time.Microsecond
	}
	return d, nil
}

func parseReport(v []any) (Status, error) {
	if len(v) != 7 {
		return Status{}, fmt.Errorf("the report script answered %d values, want 7", len(v))
	}
	s, err1 := str(v[0])
	changed, err2 := integer(v[1])
	retry, err3 := micros(v[2])
	now, err4 := micros(v[3])
	opened, err5 := micros(v[4])
	reason, err6 := str(v[5])
	own, err7 := integer(v[6])
	if err := errors.Join(err1, err2, err3, err4, err5, err6, err7); err != nil {
		return Status{}, fmt.Errorf("the report script answered %v: %w", v, err)
	}
	state, err := parseState(s)
	if err != nil {
		return Status{}, err
	}
	st := status(state, retry, now, opened, changed == 1)
	st.Reason = Reason(reason)
	st.Own = own == 1
	return st, nil
}

func parsePeek(v []any) (Status, error) {
	if len(v) != 8 {
		return Status{}, fmt.Errorf("the peek script answered %d values, want 8", len(v))
	}
	s, err1 := str(v[0])
	retry, err2 := micros(v[1])
	now, err3 := micros(v[2])
	opened, err4 := micros(v[3])
	probes, err5 := integer(v[4])
	opens, err6 := integer(v[5])
	lapsed, err7 := integer(v[6])
	reason, err8 := str(v[7])
	if err := errors.Join(err1, err2, err3, err4, err5, err6, err7, err8); err != nil {
		return Status{}, fmt.Errorf("the peek script answered %v: %w", v, err)
	}
	state, err := parseState(s)
	if err != nil {
		return Status{}, err
	}
	st := status(state, retry, now, opened, false)
	st.Probes, st.Opens, st.Lapsed, st.Reason = probes, opens, lapsed, Reason(reason)
	return st, nil
}

func status(s State, retry, now, opened int64, changed bool) Status {
	st := Status{State: s, RetryAt: time.UnixMicro(retry), Now: time.UnixMicro(now), OpenFor: since(opened, now), Changed: changed}
	if retry > now {
		st.Wait = time.Duration(retry-now) * time.Microsecond
	}
	return st
}
