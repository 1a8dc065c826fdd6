// Test-only wrapper: builds the upstream kubectl from the k8s.io/kubectl
// module at the release matching k8s.io/kubernetes in ../../go.mod, so the
// test tiers never depend on whatever kubectl the machine has. Not part of the
// product.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"

	// Import to initialize client auth plugins.
	_ "k8s.io/client-go/plugin/pkg/client/auth"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		// Pretty-print the error and exit with an error.
		util.CheckErr(err)
	}
}
