// livenessprobe stand-in, with the upstream sidecar's flags and behaviour
// (kubernetes-csi livenessprobe v2.x): it waits for the CSI socket without a
// deadline, calls GetPluginInfo once (an error exits 1), then serves
// GET /healthz: a new connection and Identity.Probe per request (deadline
// --probe-timeout), 200 "ok" when ready (or ready unset), 500 otherwise.
//
// The upstream image is not available to this test tier (the Go module proxy
// refuses the module); this is our own code. Test tier only; never shipped.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"k8s.io/klog/v2"

	"s3csi.test/real_node/sidecars/internal/cli"
	"s3csi.test/real_node/sidecars/internal/csiconn"
)

func main() {
	fs := flag.NewFlagSet("livenessprobe", flag.ContinueOnError)
	csiAddress := fs.String("csi-address", "/run/csi/socket", "Path of the CSI driver socket.")
	healthPort := fs.Int("health-port", 9808, "Deprecated: TCP port of /healthz on 0.0.0.0 (use --http-endpoint).")
	httpEndpoint := fs.String("http-endpoint", "", "Address of the /healthz server, e.g. :9808.")
	probeTimeout := fs.Duration("probe-timeout", 3*time.Second, "Deadline of each connect + Probe.")
	metricsPath := fs.String("metrics-path", "/metrics", "Accepted for compatibility; this stand-in serves no metrics.")
	fs.String("metrics-address", "", "Deprecated; accepted for compatibility, ignored.")
	cli.Parse(fs, os.Args[1:])
	_ = metricsPath

	addr := fmt.Sprintf("0.0.0.0:%d", *healthPort)
	if *httpEndpoint != "" {
		if *healthPort != 9808 {
			cli.Fatal("only one of --health-port and --http-endpoint may be set")
		}
		addr = *httpEndpoint
	}
	ctx, stop := cli.SignalContext()
	defer stop()

	klog.Infof("Waiting for the CSI driver at %s", *csiAddress)
	conn, err := csiconn.Connect(ctx, *csiAddress, 0)
	if err != nil {
		cli.Fatal("failed to connect to the CSI driver: %v", err)
	}
	name, err := csiconn.DriverName(ctx, conn, 0)
	conn.Close()
	if err != nil {
		cli.Fatal("failed to get the CSI driver name: %v", err)
	}
	klog.Infof("CSI driver name: %q", name)

	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		probe(w, r, *csiAddress, *probeTimeout)
	})
	srv := &http.Server{Addr: addr, Handler: mux}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	klog.Infof("Serving /healthz on %s", addr)
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		cli.Fatal("health server: %v", err)
	}
	klog.Flush()
}

func probe(w http.ResponseWriter, r *http.Request, address string, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	conn, err := csiconn.Connect(ctx, address, timeout)
	if err != nil {
		klog.Errorf("health check failed to connect: %v", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer conn.Close()
	ready, err := csiconn.Probe(ctx, conn, timeout)
	if err != nil {
		klog.Errorf("health check failed: %v", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if !ready {
		http.Error(w, "driver responded but is not ready", http.StatusInternalServerError)
		return
	}
	klog.V(5).Info("Health check succeeded")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("ok"))
}
