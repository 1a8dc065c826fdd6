// Package csiconn connects to a CSI driver's unix socket the way the
// kubernetes-csi sidecars do (csi-lib-utils' connection and rpc packages): a
// bare path becomes unix://<path>, the dial retries until a deadline, Probe is
// retried only while the driver is not ready or times out, and
// GetPluginInfo's name is the driver name.
//
// Test tier only (stand-ins for sidecars the Go module proxy does not serve);
// never shipped.
package csiconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// SocketPath turns a --csi-address value (a path or unix://path) into a path.
func SocketPath(address string) string {
	if rest, ok := strings.CutPrefix(address, "unix://"); ok {
		return rest
	}
	return address
}

// Dial opens a gRPC client connection to the socket without waiting for it.
func Dial(address string) (*grpc.ClientConn, error) {
	path := SocketPath(address)
	return grpc.NewClient("passthrough:///"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}),
		// Sidecars must not wait forever on a socket that accepts but never answers.
		grpc.WithIdleTimeout(0),
	)
}

// Connect dials and waits until the connection is ready or timeout passes
// (timeout 0: wait forever, as livenessprobe does). It retries about once a
// second, logging each failure, like csi-lib-utils' connection.Connect.
func Connect(ctx context.Context, address string, timeout time.Duration) (*grpc.ClientConn, error) {
	conn, err := Dial(address)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", address, err)
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	conn.Connect()
	last := time.Now()
	for {
		state := conn.GetState()
		if state == connectivity.Ready {
			return conn, nil
		}
		if time.Since(last) > 10*time.Second {
			klog.Infof("Still connecting to %s (state %s)", address, state)
			last = time.Now()
		}
		waitCtx, cancel := context.WithTimeout(ctx, time.Second)
		conn.WaitForStateChange(waitCtx, state)
		cancel()
		if ctx.Err() != nil {
			conn.Close()
			return nil, fmt.Errorf("connecting to %s: %w", address, ctx.Err())
		}
		if conn.GetState() == connectivity.TransientFailure || conn.GetState() == connectivity.Idle {
			conn.Connect()
		}
	}
}

// DriverName calls Identity.GetPluginInfo with a deadline (0: none) and
// returns the driver name; an empty name is an error.
func DriverName(ctx context.Context, conn *grpc.ClientConn, timeout time.Duration) (string, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	rsp, err := csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil {
		return "", fmt.Errorf("GetPluginInfo: %w", err)
	}
	if rsp.GetName() == "" {
		return "", errors.New("GetPluginInfo returned an empty driver name")
	}
	return rsp.GetName(), nil
}

// Probe calls Identity.Probe once with a deadline; ready is true when the
// driver says so or leaves the field unset.
func Probe(ctx context.Context, conn *grpc.ClientConn, timeout time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rsp, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{})
	if err != nil {
		return false, err
	}
	if rsp.GetReady() == nil {
		return true, nil
	}
	return rsp.GetReady().GetValue(), nil
}

// ProbeForever calls Probe every second until the driver is ready. Like
// csi-lib-utils' rpc.ProbeForever it retries only on DeadlineExceeded and
// ready=false; any other error (Unimplemented included) is returned.
func ProbeForever(ctx context.Context, conn *grpc.ClientConn, timeout time.Duration) error {
	for {
		ready, err := Probe(ctx, conn, timeout)
		switch {
		case err == nil && ready:
			return nil
		case err == nil:
			klog.Info("CSI driver is not ready yet")
		case status.Code(err) == codes.DeadlineExceeded:
			klog.Infof("CSI driver probe timed out: %v", err)
		default:
			return fmt.Errorf("probe failed: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// Capabilities are the plugin and controller capabilities a driver reports.
type Capabilities struct {
	ControllerService     bool
	CreateDeleteVolume    bool
	Topology              bool
	PublishUnpublish      bool
	SingleNodeMultiWriter bool
}

// GetCapabilities calls GetPluginCapabilities and, when the plugin has a
// Controller service, ControllerGetCapabilities (each with the deadline).
func GetCapabilities(ctx context.Context, conn *grpc.ClientConn, timeout time.Duration) (Capabilities, error) {
	var caps Capabilities
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	prsp, err := csi.NewIdentityClient(conn).GetPluginCapabilities(cctx, &csi.GetPluginCapabilitiesRequest{})
	if err != nil {
		return caps, fmt.Errorf("GetPluginCapabilities: %w", err)
	}
	for _, c := range prsp.GetCapabilities() {
		switch c.GetService().GetType() {
		case csi.PluginCapability_Service_CONTROLLER_SERVICE:
			caps.ControllerService = true
		case csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS:
			caps.Topology = true
		}
	}
	if !caps.ControllerService {
		return caps, nil
	}
	cctx2, cancel2 := context.WithTimeout(ctx, timeout)
	defer cancel2()
	crsp, err := csi.NewControllerClient(conn).ControllerGetCapabilities(cctx2, &csi.ControllerGetCapabilitiesRequest{})
	if err != nil {
		return caps, fmt.Errorf("ControllerGetCapabilities: %w", err)
	}
	for _, c := range crsp.GetCapabilities() {
		switch c.GetRpc().GetType() {
		case csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME:
			caps.CreateDeleteVolume = true
		case csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME:
			caps.PublishUnpublish = true
		case csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER:
			caps.SingleNodeMultiWriter = true
		}
	}
	return caps, nil
}

// ExitOnConnectionLoss watches conn and calls onLoss once it goes from Ready
// to anything but Ready/Idle/Connecting for good (TransientFailure or
// Shutdown), like csi-lib-utils' ExitOnConnectionLoss.
func ExitOnConnectionLoss(ctx context.Context, conn *grpc.ClientConn, onLoss func()) {
	go func() {
		for {
			state := conn.GetState()
			if state == connectivity.TransientFailure || state == connectivity.Shutdown {
				onLoss()
				return
			}
			if !conn.WaitForStateChange(ctx, state) {
				return
			}
		}
	}()
}
