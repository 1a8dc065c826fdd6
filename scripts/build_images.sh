#!/usr/bin/env bash
# Build the driver's three images with docker buildx (`deno task images`):
#   <registry>/s3-csi-node, <registry>/s3-csi-controller, <registry>/s3-csi-mounter
# tagged with the version in deno.json (the one place versions come from; the manifests'
# default tags use the same field).
#
# Environment:
#   REGISTRY   image prefix (default ghcr.io/scality, as image.registry in src/deploy/values.ts)
#   PLATFORMS  buildx platforms (default linux/amd64,linux/arm64)
#   PUSH=1     push the multi-arch images; otherwise build for the local platform only and
#              --load them into docker (a multi-platform result cannot be loaded)
#   ONLY       comma-separated subset of node,controller,mounter
#   TAG        override the tag (default: deno.json version)
#   S3CSI_VERSION  refused here: the Dockerfiles compile deno.json's version; builds of another
#              version (to try an upgrade) are made by `deno task images:local` (S3CSI_VERSION)
# Skips with a printed reason (exit 0) when docker or buildx is absent.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ -n "${S3CSI_VERSION:-}" ]; then
  echo "build_images: S3CSI_VERSION is not supported by the docker build (its binaries embed deno.json's version): use deno task images:local, or change deno.json" >&2
  exit 2
fi
skip() { printf 'build_images: skipped: %s\n' "$1" >&2; exit 0; }
command -v docker >/dev/null 2>&1 || skip "docker is not installed"
docker info >/dev/null 2>&1 || skip "the docker daemon is not reachable"
docker buildx version >/dev/null 2>&1 || skip "docker buildx is not available"

VERSION=$(sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' deno.json | head -1)
[ -n "$VERSION" ] || { echo "build_images: no \"version\" in deno.json" >&2; exit 1; }
TAG=${TAG:-$VERSION}
REGISTRY=${REGISTRY:-ghcr.io/scality}
REGISTRY=${REGISTRY%/}
PLATFORMS=${PLATFORMS:-linux/amd64,linux/arm64}
ONLY=${ONLY:-node,controller,mounter}

if [ "${PUSH:-}" = "1" ]; then
  output=(--push --platform "$PLATFORMS")
else
  output=(--load)
  printf 'build_images: PUSH!=1: building for the local platform only and loading into docker\n' >&2
fi

build() {
  local name="$1" dockerfile="$2"; shift 2
  local image="$REGISTRY/s3-csi-$name:$TAG"
  printf '\n=== %s (%s)\n' "$image" "$dockerfile" >&2
  docker buildx build "${output[@]}" \
    -f "$dockerfile" \
    --build-arg VERSION="$TAG" \
    "$@" \
    -t "$image" \
    .
  printf '%s\n' "$image"
}

IFS=, read -r -a components <<< "$ONLY"
for c in "${components[@]}"; do
  case "$c" in
    node|controller) build "$c" images/driver.Dockerfile --build-arg COMPONENT="$c" ;;
    mounter) build mounter images/mounter.Dockerfile ;;
    *) echo "build_images: unknown component \"$c\" (node, controller, mounter)" >&2; exit 2 ;;
  esac
done
