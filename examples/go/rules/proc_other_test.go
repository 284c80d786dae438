//go:build !linux

package rules_test

import "syscall"

// dieWithParent has no portable form outside Linux: the server outlives a killed test there.
func dieWithParent() *syscall.SysProcAttr { return nil }
