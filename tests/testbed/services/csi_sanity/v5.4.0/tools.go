//go:build tools

// Package tools records the csi-sanity command as a dependency of this module (a Go 1.23
// go.mod has no tool directive); ../build.sh builds it.
package tools

import _ "github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity"
