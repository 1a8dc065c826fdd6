# syntax=docker/dockerfile:1.7
# Node plugin or controller image (one Dockerfile, COMPONENT=node|controller):
#   1. builder: `deno compile` the component in the official Deno image (for TARGETARCH);
#   2. runtime: distroless/cc (glibc + libgcc, which compiled Deno binaries need; the node plugin's
#      FFI uses the same libc.so.6), nothing else: no shell, no package manager.
# Build with scripts/build_images.sh (tags from deno.json "version").
# scripts/build_images_local.ts builds the same images without docker or a registry (Deno + bundle
# + a static launcher at /bin/s3-csi-driver, as `deno compile` cannot fetch its runtime there): keep
# the entrypoint, user and labels of both in step.
ARG DENO_VERSION=2.9.6

FROM --platform=$BUILDPLATFORM denoland/deno:${DENO_VERSION} AS builder
ARG TARGETARCH
ARG COMPONENT
WORKDIR /src
# Dependencies first, so source edits do not refetch npm packages.
COPY deno.json deno.lock ./
RUN deno install --frozen
COPY src/ src/
COPY scripts/ scripts/
COPY proto/ proto/
# Cross-compile for the target platform; bake the component's V8 heap limits (scripts/build.ts).
# --no-check: `--v8-flags` also bounds the compiling process, which runs out of heap while
# type-checking at 64 MB (seen); type checking is `deno task check`'s job, before images.
RUN test -n "${COMPONENT}" || (echo "build with --build-arg COMPONENT=node|controller" >&2; exit 1); \
    case "${TARGETARCH}" in \
      amd64) target=x86_64-unknown-linux-gnu ;; \
      arm64) target=aarch64-unknown-linux-gnu ;; \
      *) echo "unsupported TARGETARCH ${TARGETARCH}" >&2; exit 1 ;; \
    esac; \
    flags=$(deno eval --quiet "import { V8_FLAGS } from './scripts/build.ts'; console.log(V8_FLAGS['${COMPONENT}'])"); \
    deno compile -A --frozen --no-check --target "${target}" --v8-flags="${flags}" \
      --output /out/s3-csi-${COMPONENT} src/cmd/${COMPONENT}/main.ts

FROM gcr.io/distroless/cc-debian12:nonroot
ARG COMPONENT
ARG VERSION=dev
LABEL org.opencontainers.image.title="s3-csi-${COMPONENT}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/scality/s3-csi-driver" \
      org.opencontainers.image.description="s3.csi.scality.com ${COMPONENT}"
COPY --from=builder /out/s3-csi-${COMPONENT} /bin/s3-csi-driver
# glibc malloc gives back what Deno frees (GLIBC_TUNABLES in scripts/build.ts says why and what it
# measured; scripts/build_images_local.ts sets the same value, tests/cli/build_test.ts checks both).
ENV GLIBC_TUNABLES=glibc.malloc.mmap_threshold=32768:glibc.malloc.trim_threshold=32768
# The controller runs as the image's nonroot user (65532); the node DaemonSet overrides it with
# runAsUser 0 because it mounts (see k8s/deploy and docs/adr/0006-manifests-from-typescript.md).
USER 65532:65532
ENTRYPOINT ["/bin/s3-csi-driver"]
