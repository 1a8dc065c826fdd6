// node-driver-registrar stand-in: registers a CSI driver with the kubelet
// through the plugin-registration API (k8s.io/kubelet pluginregistration/v1),
// with the upstream sidecar's flags and behaviour (kubernetes-csi
// node-driver-registrar v2.x):
//
//   - GetPluginInfo on --csi-address (deadline --timeout) gives the driver name;
//   - <--plugin-registration-path>/<driver>-reg.sock serves GetInfo
//     (type CSIPlugin, endpoint --kubelet-registration-path, versions 1.0.0)
//     and NotifyRegistrationStatus (a rejection exits 1, so the container
//     restarts and registers again);
//   - GET /healthz on --http-endpoint: 200 when the socket exists and GetInfo
//     over it returns the driver name, 404 without the socket, 500 otherwise;
//   - SIGTERM removes the socket and exits 0.
//
// The upstream image is not available to this test tier (the Go module proxy
// refuses the module); this is our own code. Test tier only; never shipped.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"s3csi.test/real_node/sidecars/internal/cli"
	"s3csi.test/real_node/sidecars/internal/csiconn"
)

type registrationServer struct {
	registerapi.UnimplementedRegistrationServer
	driverName string
	endpoint   string
}

func (s *registrationServer) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	klog.Info("Received GetInfo call from the kubelet")
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              s.driverName,
		Endpoint:          s.endpoint,
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

func (s *registrationServer) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	klog.Infof("Received NotifyRegistrationStatus call: %+v", st)
	if !st.PluginRegistered {
		cli.Fatal("Registration process failed with error: %s, restarting registration container.", st.Error)
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

func main() {
	fs := flag.NewFlagSet("csi-node-driver-registrar", flag.ContinueOnError)
	csiAddress := fs.String("csi-address", "/run/csi/socket", "Path of the CSI driver socket inside the container.")
	kubeletPath := fs.String("kubelet-registration-path", "", "Path of the CSI driver socket on the host, as the kubelet dials it (required).")
	regPath := fs.String("plugin-registration-path", "/registration", "Directory of the kubelet's plugin registration sockets.")
	timeout := fs.Duration("timeout", time.Second, "Deadline of GetPluginInfo and of the health check's GetInfo.")
	httpEndpoint := fs.String("http-endpoint", "", "Address of the /healthz server, e.g. :9809 (empty: off).")
	healthPort := fs.Int("health-port", 0, "Deprecated: port of /healthz (use --http-endpoint).")
	fs.String("mode", "", "Deprecated and ignored (kubelet-registration-probe is a no-op upstream).")
	fs.Duration("connection-timeout", 0, "Deprecated and ignored.")
	cli.Parse(fs, os.Args[1:])

	if *kubeletPath == "" {
		cli.Fatal("--kubelet-registration-path is required")
	}
	if *healthPort != 0 && *httpEndpoint != "" {
		cli.Fatal("only one of --health-port and --http-endpoint may be set")
	}
	if *healthPort != 0 {
		*httpEndpoint = fmt.Sprintf(":%d", *healthPort)
	}
	ctx, stop := cli.SignalContext()
	defer stop()

	klog.Infof("Connecting to the CSI driver at %s", *csiAddress)
	conn, err := csiconn.Connect(ctx, *csiAddress, 30*time.Second)
	if err != nil {
		cli.Fatal("error connecting to CSI driver: %v", err)
	}
	name, err := csiconn.DriverName(ctx, conn, *timeout)
	conn.Close()
	if err != nil {
		cli.Fatal("error retrieving CSI driver name: %v", err)
	}
	klog.Infof("CSI driver name: %q", name)

	socketPath := filepath.Join(*regPath, name+"-reg.sock")
	if err := os.Remove(socketPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		cli.Fatal("failed to remove stale socket %s: %v", socketPath, err)
	}
	old := syscall.Umask(0o077)
	lis, err := net.Listen("unix", socketPath)
	syscall.Umask(old)
	if err != nil {
		cli.Fatal("failed to listen on %s: %v", socketPath, err)
	}
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, &registrationServer{driverName: name, endpoint: *kubeletPath})
	go func() {
		klog.Infof("Registration server listening on %s", socketPath)
		if err := srv.Serve(lis); err != nil {
			cli.Fatal("registration server stopped: %v", err)
		}
	}()

	if *httpEndpoint != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
			healthz(w, r, socketPath, name, *timeout)
		})
		go func() {
			klog.Infof("Health server on %s", *httpEndpoint)
			if err := http.ListenAndServe(*httpEndpoint, mux); err != nil {
				cli.Fatal("health server: %v", err)
			}
		}()
	}

	<-ctx.Done()
	klog.Info("Received a termination signal; removing the registration socket")
	srv.Stop()
	_ = os.Remove(socketPath)
	klog.Flush()
}

// healthz answers like the upstream registrar: the socket must exist and
// answer GetInfo with this driver's name.
func healthz(w http.ResponseWriter, r *http.Request, socketPath, name string, timeout time.Duration) {
	if _, err := os.Stat(socketPath); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			http.Error(w, fmt.Sprintf("registration socket %s does not exist", socketPath), http.StatusNotFound)
			return
		}
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	conn, err := csiconn.Dial(socketPath)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	info, err := registerapi.NewRegistrationClient(conn).GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		http.Error(w, fmt.Sprintf("GetInfo over %s: %v", socketPath, err), http.StatusInternalServerError)
		return
	}
	if info.Name != name {
		http.Error(w, fmt.Sprintf("GetInfo returned %q, want %q", info.Name, name), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("ok"))
}
