// Command pause is the test cluster's pod sandbox process: it holds the pod's namespaces and
// reaps the orphans it inherits, doing nothing else until it is told to stop. No registry is
// reachable here, so the kubelet's usual pause image cannot be pulled; this one is built
// from source into a FROM scratch image instead.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for received := range signals {
		if received != syscall.SIGCHLD {
			return
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
