package testweed

import (
	"os/exec"
	"syscall"
)

// dieWithParent: weed is killed when the test process dies without its
// cleanup (a test timeout's panic, a SIGKILL), instead of staying behind
// with its ports.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
