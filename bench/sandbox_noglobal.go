//go:build !globallimit

package main

import (
	"errors"
	"time"

	"github.com/bulkreg/bulkreg/internal/sandbox"
)

// Until the sandbox has an app-wide limit (issue 12) the global scenario
// cannot run, and `all` skips it. At that merge: delete this file, drop the
// build tag of sandbox_global.go and the sandboxHasGlobalLimit checks.
const sandboxHasGlobalLimit = false

func setGlobalLimit(_ *sandbox.Options, limit int, _ time.Duration) error {
	if limit > 0 {
		return errors.New(noGlobalLimit)
	}
	return nil
}
