// kubelet-client: many kubelet-style gRPC clients against a CSI node plugin, for the soak test
// (tests/adversarial/grpc_soak_test.ts). Like kubelet's CSI client, every call dials a new
// connection, makes one call and closes the connection; several workers run at once and some
// calls are abandoned mid-call (context cancelled, or the connection closed under the call).
//
// Output: one JSON line with the counts. Exit 0 when every cycle ended with an expected outcome,
// 1 when a cycle saw an unexpected one (e.g. the socket stopped answering), 2 on bad flags.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	csi "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

type counts struct {
	Cycles      int64            `json:"cycles"`
	OK          int64            `json:"ok"`
	Expected    int64            `json:"expectedErrors"`
	Abandoned   int64            `json:"abandoned"`
	Raw         int64            `json:"raw"`
	Unexpected  int64            `json:"unexpected"`
	Codes       map[string]int64 `json:"codes"`
	FirstErrors []string         `json:"firstErrors"`
	Seconds     float64          `json:"seconds"`
}

var (
	mu  sync.Mutex
	out = counts{Codes: map[string]int64{}}
)

func record(code codes.Code) {
	mu.Lock()
	out.Codes[code.String()]++
	mu.Unlock()
}

func unexpected(format string, args ...any) {
	atomic.AddInt64(&out.Unexpected, 1)
	mu.Lock()
	if len(out.FirstErrors) < 20 {
		out.FirstErrors = append(out.FirstErrors, fmt.Sprintf(format, args...))
	}
	mu.Unlock()
}

func dial(socket string) (*grpc.ClientConn, error) {
	// The kubelet's CSI client: insecure, a unix dialer, a new connection per operation.
	return grpc.NewClient("passthrough:///unix-socket",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}),
	)
}

// call makes one of the calls kubelet makes, with answers that a healthy plugin gives.
func call(ctx context.Context, conn *grpc.ClientConn, kind int, target string) (codes.Code, error) {
	node := csi.NewNodeClient(conn)
	var err error
	switch kind {
	case 0:
		_, err = csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{})
	case 1:
		_, err = node.NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{})
	case 2:
		_, err = node.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	case 3:
		_, err = csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	case 4:
		// A volume that is not mounted: NotFound.
		_, err = node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "vol-soak", VolumePath: target})
	case 5:
		// Missing volume id: InvalidArgument.
		_, err = node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{TargetPath: target})
	default:
		// Unpublish of a target that was never published: OK (idempotent).
		_, err = node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-soak", TargetPath: target})
	}
	return status.Code(err), err
}

var expectedCodes = map[int]codes.Code{0: codes.OK, 1: codes.OK, 2: codes.OK, 3: codes.OK, 4: codes.NotFound, 5: codes.InvalidArgument, 6: codes.OK}

// slowCall is a publish that waits (no attachment exists): used to abandon calls mid-flight.
func slowCall(ctx context.Context, conn *grpc.ClientConn, target string, uid string) error {
	_, err := csi.NewNodeClient(conn).NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
		VolumeId:   "vol-soak",
		TargetPath: target,
		VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
		},
		VolumeContext: map[string]string{"bucketName": "soak-bucket", "csi.storage.k8s.io/pod.uid": uid},
	})
	return err
}

// raw opens the socket and misbehaves at the HTTP/2 level: a preface and a half frame, garbage,
// or a GOAWAY right after the preface, then an abrupt close.
func raw(socket string, r *rand.Rand) error {
	c, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	preface := []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	settings := []byte{0, 0, 0, 4, 0, 0, 0, 0, 0}
	switch r.Intn(4) {
	case 0:
		_, err = c.Write(append(preface, 0, 0, 10, 1)) // half a HEADERS frame header
	case 1:
		_, err = c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	case 2:
		goaway := []byte{0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
		_, err = c.Write(append(append(preface, settings...), goaway...))
	default:
		// HEADERS for stream 1 with a bogus HPACK block, then RST_STREAM.
		hdr := []byte{0, 0, 3, 1, 4, 0, 0, 0, 1, 0xff, 0xff, 0xff}
		rst := []byte{0, 0, 4, 3, 0, 0, 0, 0, 1, 0, 0, 0, 8}
		_, err = c.Write(append(append(append(preface, settings...), hdr...), rst...))
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return nil // the server may close first; that is fine
	}
	buf := make([]byte, 4096)
	_, _ = c.Read(buf)
	return nil
}

func main() {
	socket := flag.String("socket", "", "unix socket of the CSI plugin")
	cycles := flag.Int("cycles", 10000, "connect/call/close cycles in total")
	workers := flag.Int("workers", 8, "clients at once")
	abandonEvery := flag.Int("abandon-every", 10, "every Nth cycle is abandoned mid-call (0: never)")
	rawEvery := flag.Int("raw-every", 0, "every Nth cycle misbehaves at the HTTP/2 level (0: never)")
	timeout := flag.Duration("timeout", 30*time.Second, "deadline of one call")
	kubelet := flag.String("kubelet-root", "/var/lib/kubelet", "kubelet root of target paths")
	flag.Parse()
	if *socket == "" || *cycles <= 0 || *workers <= 0 {
		flag.Usage()
		os.Exit(2)
	}
	start := time.Now()
	var next int64 = -1
	var wg sync.WaitGroup
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(w) + time.Now().UnixNano()))
			for {
				i := atomic.AddInt64(&next, 1)
				if i >= int64(*cycles) {
					return
				}
				atomic.AddInt64(&out.Cycles, 1)
				uid := fmt.Sprintf("soak-%d-%d", w, i)
				target := fmt.Sprintf("%s/pods/%s/volumes/kubernetes.io~csi/pv-soak/mount", *kubelet, uid)
				if *rawEvery > 0 && i%int64(*rawEvery) == int64(*rawEvery)-1 {
					atomic.AddInt64(&out.Raw, 1)
					if err := raw(*socket, r); err != nil {
						unexpected("raw cycle %d: %v", i, err)
					}
					continue
				}
				conn, err := dial(*socket)
				if err != nil {
					unexpected("dial cycle %d: %v", i, err)
					continue
				}
				if *abandonEvery > 0 && i%int64(*abandonEvery) == int64(*abandonEvery)-1 {
					atomic.AddInt64(&out.Abandoned, 1)
					ctx, cancel := context.WithTimeout(context.Background(), *timeout)
					done := make(chan error, 1)
					go func() { done <- slowCall(ctx, conn, target, uid) }()
					time.Sleep(time.Duration(r.Intn(3000)) * time.Microsecond)
					if r.Intn(2) == 0 {
						cancel() // the caller gives up: RST_STREAM
					} else {
						conn.Close() // the connection goes away under the call
					}
					err := <-done
					cancel()
					conn.Close()
					code := status.Code(err)
					record(code)
					// Cancelled/Unavailable: abandoned in time; a real answer: the server was faster.
					if code != codes.Canceled && code != codes.Unavailable && code != codes.FailedPrecondition && code != codes.DeadlineExceeded {
						unexpected("abandoned cycle %d: %v", i, err)
					}
					continue
				}
				kind := r.Intn(7)
				ctx, cancel := context.WithTimeout(context.Background(), *timeout)
				code, err := call(ctx, conn, kind, target)
				cancel()
				conn.Close()
				record(code)
				if code != expectedCodes[kind] {
					unexpected("cycle %d call %d: want %v, got %v", i, kind, expectedCodes[kind], err)
				} else if code == codes.OK {
					atomic.AddInt64(&out.OK, 1)
				} else {
					atomic.AddInt64(&out.Expected, 1)
				}
			}
		}(w)
	}
	wg.Wait()
	out.Seconds = time.Since(start).Seconds()
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	if out.Unexpected > 0 {
		os.Exit(1)
	}
}
