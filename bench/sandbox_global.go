//go:build globallimit

package main

import (
	"time"

	"github.com/bulkreg/bulkreg/internal/sandbox"
)

// The sandbox's app-wide limit (issue 12) is set here alone, so the rest of
// the bench builds before it lands. At that merge: drop this build tag,
// delete sandbox_noglobal.go and the sandboxHasGlobalLimit checks.
const sandboxHasGlobalLimit = true

func setGlobalLimit(o *sandbox.Options, limit int, window time.Duration) error {
	o.GlobalLimit, o.GlobalWindow = limit, window
	return nil
}
