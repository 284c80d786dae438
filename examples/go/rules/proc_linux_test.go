package rules_test

import "syscall"

// dieWithParent kills the server if this test process dies first (its workers follow it).
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
