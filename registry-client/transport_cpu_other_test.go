//go:build !unix

package registryclient

import "time"

// processCPU is unknown here: the benchmark reports no cpu-ns/op.
func processCPU() time.Duration { return 0 }
