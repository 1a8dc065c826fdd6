// Test-only wrapper: builds etcd from go.etcd.io/etcd/server/v3 at the version
// k8s.io/kubernetes itself pins (see ../../go.mod). Used when Debian's
// etcd-server package is unusable. Not part of the product.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
