#!/usr/bin/env bash
# `deno task test`: every test tier this machine supports, in order, with one summary at the end.
#   1. ok        fmt check, lint, type check, unit tests (no permissions)
#   2. gen       generated files match their generators
#   3. tests/    integration tiers (real processes, FUSE, S3, API servers); a tier whose
#                prerequisites are missing skips with a printed reason
# Ends with a line "N passed, N failed, N skipped" counted from the JUnit reports.
# Set TEST_FILTER to pass --filter to deno test; TEST_PATHS to run only some paths of tests/.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

REPORTS="dist/test-reports"
rm -rf "$REPORTS" && mkdir -p "$REPORTS"
failed_steps=()

step() {
  local name="$1"; shift
  printf '\n=== %s: %s\n' "$name" "$*" >&2
  local started=$SECONDS
  if "$@"; then
    printf '=== %s passed in %ss\n' "$name" $((SECONDS - started)) >&2
  else
    printf '=== %s FAILED in %ss\n' "$name" $((SECONDS - started)) >&2
    failed_steps+=("$name")
  fi
}

filter=()
[ -n "${TEST_FILTER:-}" ] && filter=(--filter "$TEST_FILTER")

step fmt deno fmt --check
step lint deno lint
step check deno task check
# Unit tests get no permissions, except two env vars the yaml package reads when parsing.
step unit deno test --parallel --allow-env=LOG_TOKENS,LOG_STREAM --junit-path="$REPORTS/unit.xml" "${filter[@]}" src/
step gen deno task gen:check
# shellcheck disable=SC2086
step integration deno test -A --junit-path="$REPORTS/integration.xml" "${filter[@]}" ${TEST_PATHS:-tests/}

summary=$(deno run --allow-read=dist scripts/junit_summary.ts "$REPORTS"/*.xml)
echo
echo "steps failed: ${#failed_steps[@]}${failed_steps[*]:+ (${failed_steps[*]})}"
echo "$summary"
[ "${#failed_steps[@]}" -eq 0 ]
