// Package scriptbatch runs several of bulkreg's Redis scripts that touch one
// hash tag as a single script: one EVALSHA, one command for Redis to parse,
// one Lua call to set up, instead of one each.
//
// A registered row leaves three commands behind its call, each on the
// seller's hash tag: the call in the compliance history, the slot settled at
// the answer, the SKU marked in the ledger. Run as three scripts, most of
// Redis's time per row goes to per-script overhead, not to the commands the
// scripts run (INFO commandstats in the bench: about a quarter of an
// EVALSHA's time is in the commands inside). A batch runs the same script
// bodies, unchanged and in order, so each keeps the contract its file's
// header gives.
//
// Every step must touch only keys of one hash tag (the combined script runs
// on one Cluster slot, and Redis refuses it otherwise), and be safe to run
// again: a batch is retried whole when its answer is lost, and a step that
// fails stops the batch where it is, with the steps before it done.
package scriptbatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/bulkreg/bulkreg/lua"
	"github.com/redis/go-redis/v9"
)

// Step is one script of a batch.
type Step struct {
	// Script names the script's file in package lua ("compliance_record.lua"),
	// or several joined by "+" that make one script together
	// ("slot_guard.lua+fits.lua+reserve.lua").
	Script string
	Keys   []string
	Args   []any
	// Reply, when set, gets the step's reply once the whole batch has run,
	// as go-redis decodes a script's reply (nil for a Lua false or nil).
	// Its error is the batch's.
	Reply func(v any) error
}

// Runner runs batches. It keeps the combined script of each set of scripts
// it has run, so a set is composed and hashed once; which of them run, and
// in what order, travels in ARGV, so a batch of many calls' steps (the same
// three scripts over and over) is one script however many steps it has.
type Runner struct {
	mu      sync.Mutex
	scripts map[string]*redis.Script
}

// New returns a Runner with no scripts composed yet.
func New() *Runner { return &Runner{scripts: map[string]*redis.Script{}} }

// Run runs steps, in order, as one script. The keys of every step must share
// one hash tag.
func (r *Runner) Run(ctx context.Context, c redis.Scripter, steps ...Step) error {
	if len(steps) == 0 {
		return nil
	}
	var names []string // each script once, sorted: any order of the same scripts is one script
	nkeys, nargs := 0, 1+3*len(steps)
	for _, s := range steps {
		if i, found := slices.BinarySearch(names, s.Script); !found {
			names = slices.Insert(names, i, s.Script)
		}
		nkeys += len(s.Keys)
		nargs += len(s.Args)
	}
	fn := make([]int, len(steps))
	for i, s := range steps {
		j, _ := slices.BinarySearch(names, s.Script)
		fn[i] = j + 1
	}
	keys, args := make([]string, 0, nkeys), make([]any, 0, nargs)
	args = append(args, len(steps))
	for i, s := range steps {
		args = append(args, fn[i], len(s.Keys), len(s.Args))
	}
	for _, s := range steps {
		keys = append(keys, s.Keys...)
		args = append(args, s.Args...)
	}
	script, err := r.script(names)
	if err != nil {
		return err
	}
	v, err := script.Run(ctx, c, keys, args...).Slice()
	if err != nil {
		return fmt.Errorf("run %s as one script: %w", strings.Join(names, ", "), err)
	}
	if len(v) != len(steps) {
		return fmt.Errorf("run %s as one script: %d replies for %d steps", strings.Join(names, ", "), len(v), len(steps))
	}
	for i, s := range steps {
		if s.Reply == nil {
			continue
		}
		if err := s.Reply(v[i]); err != nil {
			return err
		}
	}
	return nil
}

func (r *Runner) script(names []string) (*redis.Script, error) {
	key := strings.Join(names, "\x00")
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.scripts[key]; ok {
		return s, nil
	}
	body, err := Compose(names...)
	if err != nil {
		return nil, err
	}
	s := redis.NewScript(body)
	r.scripts[key] = s
	return s, nil
}

// Compose returns the script that can run the named scripts. Each body
// becomes a function whose parameters KEYS and ARGV shadow the globals, so it
// runs unchanged on its own slice of them. ARGV opens with the number of
// steps, then a (function, keys, args) triple per step, the function being
// the script's place in names counting from 1; the reply is an array of the
// steps' replies.
func Compose(names ...string) (string, error) {
	var b strings.Builder
	b.WriteString("-- scriptbatch: " + strings.Join(names, ", ") + "\nlocal fns = {}\n")
	for i, n := range names {
		body, err := body(n)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "fns[%d] = function(KEYS, ARGV)\n%s\nend\n", i+1, body)
	}
	b.WriteString(dispatch)
	return b.String(), nil
}

// body is the named script's text. A name may join several files with "+"
// ("slot_guard.lua+fits.lua+reserve.lua"): their texts run as one body, in
// that order, as a script made of them (the throttle's reserve scripts
// define their helpers in the files before them).
func body(name string) (string, error) {
	var b strings.Builder
	for part := range strings.SplitSeq(name, "+") {
		s, err := file(part)
		if err != nil {
			return "", err
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

func file(name string) (s string, err error) {
	defer func() {
		if recover() != nil {
			err = fmt.Errorf("scriptbatch: no script %q in package lua", name)
		}
	}()
	s = lua.Script(name)
	if strings.HasPrefix(s, "#!") {
		// Flags (no-writes, allow-cross-slot-keys) belong to a whole script;
		// a batch cannot take one script's.
		return "", errors.New("scriptbatch: " + name + " declares flags (#!lua) and cannot run in a batch")
	}
	return s, nil
}

// dispatch hands each step its KEYS and ARGV and collects the replies. A nil
// reply becomes false: a nil would end the reply array there.
const dispatch = `local n = tonumber(ARGV[1])
local k, a = 1, 3 * n + 2
local out = {}
for i = 1, n do
  local f, nk, na = tonumber(ARGV[3 * i - 1]), tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1])
  local keys, argv = {}, {}
  for j = 1, nk do keys[j] = KEYS[k]; k = k + 1 end
  for j = 1, na do argv[j] = ARGV[a]; a = a + 1 end
  local r = fns[f](keys, argv)
  if r == nil then r = false end
  out[i] = r
end
return out
`
