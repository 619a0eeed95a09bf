package app

import (
	"os/exec"
	"runtime"
)

// openPath shows dir in the platform's file manager. The command is started,
// not waited for: xdg-open and open return at once, explorer when its window
// closes.
func openPath(dir string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "windows":
		cmd = exec.Command("explorer", dir)
	case "darwin":
		cmd = exec.Command("open", dir)
	default:
		cmd = exec.Command("xdg-open", dir)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go cmd.Wait()
	return nil
}
