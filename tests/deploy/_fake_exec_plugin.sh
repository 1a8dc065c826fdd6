#!/usr/bin/env bash
# A fake exec credential plugin for the kubeconfig tests (stands in for aws eks get-token,
# gke-gcloud-auth-plugin, kubelogin). Configured by the kubeconfig's exec.env:
#   FAKE_STATE    directory: run N writes info.N (KUBERNETES_EXEC_INFO), tty.N (stdin a terminal?)
#                 and args.N; the number of runs is the number of info.* files
#   FAKE_TOKENS   tokens handed out, one per run; the last one repeats
#   FAKE_API      apiVersion to answer with (default: the one in KUBERNETES_EXEC_INFO)
#   FAKE_EXPIRES  expirationTimestamp to report (RFC 3339; none when empty)
#   FAKE_EXIT     exit with this code after printing a message to stderr
set -euo pipefail
n=$(( $(find "$FAKE_STATE" -maxdepth 1 -name 'info.*' | wc -l) + 1 ))
printf '%s' "${KUBERNETES_EXEC_INFO:-}" > "$FAKE_STATE/info.$n"
if [ -t 0 ]; then echo yes > "$FAKE_STATE/tty.$n"; else echo no > "$FAKE_STATE/tty.$n"; fi
printf '%s\n' "$@" > "$FAKE_STATE/args.$n"
if [ -n "${FAKE_EXIT:-}" ]; then
  echo "fake plugin: your session expired, run 'fake login'" >&2
  exit "$FAKE_EXIT"
fi
read -r -a tokens <<< "${FAKE_TOKENS}"
i=$(( n <= ${#tokens[@]} ? n - 1 : ${#tokens[@]} - 1 ))
api=${FAKE_API:-$(printf '%s' "$KUBERNETES_EXEC_INFO" | sed -E 's/.*"apiVersion":"([^"]+)".*/\1/')}
expires=""
[ -n "${FAKE_EXPIRES:-}" ] && expires=",\"expirationTimestamp\":\"$FAKE_EXPIRES\""
printf '{"apiVersion":"%s","kind":"ExecCredential","status":{"token":"%s"%s}}\n' "$api" "${tokens[$i]}" "$expires"
