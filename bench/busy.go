// Other processes keeping cores busy during a run (-busy): the pacing on a
// machine shared with a noisy neighbour.

package main

import (
	"fmt"
	"os"
	"os/exec"
)

// busyEnv, set in a child's environment, makes the bench binary spin
// instead of benchmarking: one core kept busy until it is killed.
const busyEnv = "BULKREG_BENCH_SPIN"

// spinIfAsked never returns in a child started by startBusy.
func spinIfAsked() {
	if os.Getenv(busyEnv) != "1" {
		return
	}
	for x := uint64(0); ; x++ {
		if x == 0 {
			_ = os.Getpid() // keeps the loop from being proved useless
		}
	}
}

// startBusy starts n processes that each keep one core busy; stop kills
// them and waits for them.
func startBusy(n int) (stop func(), err error) {
	var procs []*exec.Cmd
	stop = func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	}
	self, err := os.Executable()
	if err != nil {
		return stop, fmt.Errorf("-busy: find this program to start the busy processes: %w", err)
	}
	for range n {
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), busyEnv+"=1")
		if err := cmd.Start(); err != nil {
			return stop, fmt.Errorf("-busy: start a busy process: %w", err)
		}
		procs = append(procs, cmd)
	}
	return stop, nil
}
