# shellcheck shell=bash
# Shared by the service scripts that build from Go modules (kube_real, versitygw, csi_sanity).
# Sourced, not run.

# svc_find_go OVERRIDE: print the go binary to use: OVERRIDE when set (it must be executable),
# else `go` on PATH, else /usr/local/go/bin/go (where setup.sh links or upstream installs it).
svc_find_go() {
  local override="$1"
  if [ -n "$override" ]; then
    [ -x "$override" ] && echo "$override"
  elif command -v go >/dev/null 2>&1; then
    command -v go
  elif [ -x /usr/local/go/bin/go ]; then
    echo /usr/local/go/bin/go
  else
    return 1
  fi
}
