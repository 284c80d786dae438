// Command kube is the Kubernetes control plane and node of the test cluster as one binary:
// the component is named by the first argument (kube-apiserver, kube-controller-manager,
// kube-scheduler, kubelet, kube-proxy, kubectl). One binary links the shared packages once,
// which makes the cold build about half as long as five separate ones.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	kubectl "k8s.io/kubectl/pkg/cmd"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	commands := map[string]func() *cobra.Command{
		"kube-apiserver":          apiserver.NewAPIServerCommand,
		"kube-controller-manager": controllermanager.NewControllerManagerCommand,
		"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
		"kubelet":                 kubelet.NewKubeletCommand,
		"kube-proxy":              proxy.NewProxyCommand,
		"kubectl":                 kubectl.NewDefaultKubectlCommand,
	}
	if len(os.Args) < 2 || commands[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: kube kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kube-proxy|kubectl [flags]")
		os.Exit(2)
	}
	command := commands[os.Args[1]]()
	os.Args = append([]string{os.Args[1]}, os.Args[2:]...)
	os.Exit(cli.Run(command))
}
