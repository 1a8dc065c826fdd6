// Package cli holds what the stand-in sidecars share on the command line:
// klog's --v/--vmodule/--logging-format, an exit on unknown flags (upstream
// sidecars fail on them too, so manifest drift shows), signal handling, and
// the termination message written on fatal errors.
//
// Test tier only; never shipped.
package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"
)

// Parse registers the logging flags on fs, parses args and exits 1 (with the
// usage) on an unknown flag or a stray argument.
func Parse(fs *flag.FlagSet, args []string) {
	kfs := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(kfs)
	for _, name := range []string{"v", "vmodule"} {
		fs.Var(kfs.Lookup(name).Value, name, kfs.Lookup(name).Usage)
	}
	fs.String("logging-format", "text", "Sets the log format; only \"text\" is supported by this stand-in.")
	fs.Bool("version", false, "Print the version and exit.")
	if err := fs.Parse(args); err != nil {
		os.Exit(1)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unexpected arguments: %v\n", fs.Args())
		os.Exit(1)
	}
	if fs.Lookup("version").Value.String() == "true" {
		fmt.Printf("%s s3csi-testbed-standin\n", fs.Name())
		os.Exit(0)
	}
	if f := fs.Lookup("logging-format").Value.String(); f != "text" {
		fmt.Fprintf(os.Stderr, "--logging-format=%s: only text is supported\n", f)
		os.Exit(1)
	}
}

// Fatal logs, writes the message to /dev/termination-log (as the upstream
// sidecars do, so `kubectl describe` shows it) and exits 1.
func Fatal(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	klog.ErrorDepth(1, msg)
	_ = os.WriteFile("/dev/termination-log", []byte(msg), 0o644)
	klog.FlushAndExit(klog.ExitFlushTimeout, 1)
}

// SignalContext is cancelled on SIGTERM or SIGINT.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
}
