// csi-provisioner stand-in: dynamic provisioning for a CSI driver, built on
// sigs.k8s.io/sig-storage-lib-external-provisioner/v11 (the library
// external-provisioner v5 is built on), with the flags our manifests pass and
// the upstream sidecar's behaviour (kubernetes-csi external-provisioner v5.3):
//
//   - connect to --csi-address within 30 s, Probe until ready, GetPluginInfo
//     (the driver name is the provisioner name), plugin and controller
//     capabilities; exit 1 when the connection is lost later;
//   - CreateVolume/DeleteVolume built like upstream (internal/provision);
//   - leader election on a Lease named after the driver ("/" and other
//     characters replaced by "-") and /healthz/leader-election on
//     --http-endpoint.
//
// The upstream image is not available to this test tier (the Go module proxy
// refuses the module); this is our own code. Test tier only; never shipped.
package main

import (
	"context"
	"flag"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v11/controller"

	"s3csi.test/real_node/sidecars/internal/cli"
	"s3csi.test/real_node/sidecars/internal/csiconn"
	"s3csi.test/real_node/sidecars/internal/provision"
)

var lockNameChars = regexp.MustCompile(`[^a-zA-Z0-9-]`)

func main() {
	fs := flag.NewFlagSet("csi-provisioner", flag.ContinueOnError)
	csiAddress := fs.String("csi-address", "/run/csi/socket", "Path of the CSI driver socket.")
	kubeconfig := fs.String("kubeconfig", "", "Kubeconfig path (empty: in-cluster config).")
	master := fs.String("master", "", "API server address (overrides the kubeconfig).")
	prefix := fs.String("volume-name-prefix", "pvc", "Prefix of CreateVolume names.")
	uuidLength := fs.Int("volume-name-uuid-length", -1, "Truncate the PVC UID in volume names to this length (-1: full UID).")
	timeout := fs.Duration("timeout", 10*time.Second, "Deadline of each CSI call.")
	retryStart := fs.Duration("retry-interval-start", time.Second, "First retry delay after a failure.")
	retryMax := fs.Duration("retry-interval-max", 5*time.Minute, "Maximum retry delay.")
	workers := fs.Uint("worker-threads", 100, "Claim and volume workers.")
	extraMeta := fs.Bool("extra-create-metadata", false, "Add PVC/PV names to CreateVolume parameters.")
	defaultFs := fs.String("default-fstype", "", "fs type when the StorageClass sets none.")
	leaderElection := fs.Bool("leader-election", false, "Enable leader election.")
	leNamespace := fs.String("leader-election-namespace", "", "Namespace of the leader election Lease.")
	leaseDuration := fs.Duration("leader-election-lease-duration", 15*time.Second, "Lease duration.")
	renewDeadline := fs.Duration("leader-election-renew-deadline", 10*time.Second, "Renew deadline.")
	retryPeriod := fs.Duration("leader-election-retry-period", 5*time.Second, "Retry period.")
	httpEndpoint := fs.String("http-endpoint", "", "Address of /healthz/leader-election, e.g. :8080 (empty: off).")
	metricsPath := fs.String("metrics-path", "/metrics", "Accepted for compatibility; this stand-in serves no metrics.")
	qps := fs.Float64("kube-api-qps", 5, "API client QPS.")
	burst := fs.Int("kube-api-burst", 10, "API client burst.")
	_ = metricsPath
	cli.Parse(fs, os.Args[1:])

	ctx, stop := cli.SignalContext()
	defer stop()

	var cfg *rest.Config
	var err error
	if *kubeconfig != "" || *master != "" {
		cfg, err = clientcmd.BuildConfigFromFlags(*master, *kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		cli.Fatal("failed to build the API client config: %v", err)
	}
	cfg.QPS = float32(*qps)
	cfg.Burst = *burst
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		cli.Fatal("failed to create the API client: %v", err)
	}

	conn, err := csiconn.Connect(ctx, *csiAddress, 30*time.Second)
	if err != nil {
		cli.Fatal("error connecting to CSI driver: %v", err)
	}
	csiconn.ExitOnConnectionLoss(ctx, conn, func() {
		cli.Fatal("Lost connection to CSI driver, exiting")
	})
	if err := csiconn.ProbeForever(ctx, conn, *timeout); err != nil {
		cli.Fatal("error waiting for CSI driver to be ready: %v", err)
	}
	driver, err := csiconn.DriverName(ctx, conn, *timeout)
	if err != nil {
		cli.Fatal("error getting CSI driver name: %v", err)
	}
	klog.Infof("Detected CSI driver %s", driver)
	caps, err := csiconn.GetCapabilities(ctx, conn, *timeout)
	if err != nil {
		cli.Fatal("error getting CSI driver capabilities: %v", err)
	}
	if caps.Topology {
		klog.Warning("The driver reports VOLUME_ACCESSIBILITY_CONSTRAINTS; this stand-in does not implement topology")
	}
	if caps.PublishUnpublish {
		klog.Warning("The driver reports PUBLISH_UNPUBLISH_VOLUME; this stand-in does not check VolumeAttachments before DeleteVolume")
	}

	identity := provision.NewIdentity(driver)
	p := &provision.CSIProvisioner{
		Client:   client,
		Conn:     conn,
		Driver:   driver,
		Identity: identity,
		Timeout:  *timeout,
		Caps:     caps,
		Options: provision.RequestOptions{
			VolumeNamePrefix:     *prefix,
			VolumeNameUUIDLength: *uuidLength,
			DefaultFsType:        *defaultFs,
			ExtraCreateMetadata:  *extraMeta,
		},
	}
	if *prefix == "" {
		cli.Fatal("--volume-name-prefix must not be empty")
	}
	pc := controller.NewProvisionController(ctx, client, driver, p,
		controller.LeaderElection(false), // done below, as upstream
		controller.FailedProvisionThreshold(0),
		controller.FailedDeleteThreshold(0),
		controller.RateLimiter(workqueue.NewItemExponentialFailureRateLimiter(*retryStart, *retryMax)),
		controller.Threadiness(int(*workers)),
		controller.CreateProvisionedPVLimiter(workqueue.DefaultControllerRateLimiter()),
		controller.AddFinalizer(true),
	)

	run := func(ctx context.Context) { pc.Run(ctx) }
	if !*leaderElection {
		if *httpEndpoint != "" {
			go serveHTTP(*httpEndpoint, nil)
		}
		run(ctx)
		return
	}
	ns := *leNamespace
	if ns == "" {
		ns = os.Getenv("POD_NAMESPACE")
	}
	if ns == "" {
		if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
			ns = strings.TrimSpace(string(b))
		}
	}
	if ns == "" {
		ns = "default"
	}
	lockName := lockNameChars.ReplaceAllString(strings.ReplaceAll(driver, "/", "-"), "-")
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: lockName, Namespace: ns},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}
	health := leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	if *httpEndpoint != "" {
		go serveHTTP(*httpEndpoint, health)
	}
	klog.Infof("Leader election on Lease %s/%s as %s", ns, lockName, identity)
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   *leaseDuration,
		RenewDeadline:   *renewDeadline,
		RetryPeriod:     *retryPeriod,
		WatchDog:        health,
		ReleaseOnCancel: false,
		Name:            lockName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: run,
			OnStoppedLeading: func() {
				if ctx.Err() != nil {
					klog.Info("Stopped leading: terminating")
					klog.FlushAndExit(klog.ExitFlushTimeout, 0)
				}
				cli.Fatal("lost the leader election")
			},
			OnNewLeader: func(id string) { klog.Infof("New leader elected: %s", id) },
		},
	})
}

func serveHTTP(addr string, health *leaderelection.HealthzAdaptor) {
	mux := http.NewServeMux()
	if health != nil {
		mux.HandleFunc("/healthz/leader-election", func(w http.ResponseWriter, r *http.Request) {
			if err := health.Check(r); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			_, _ = w.Write([]byte("ok"))
		})
	}
	klog.Infof("HTTP server on %s", addr)
	if err := http.ListenAndServe(addr, mux); err != nil {
		cli.Fatal("HTTP server: %v", err)
	}
}
