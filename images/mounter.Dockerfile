# syntax=docker/dockerfile:1.7
# Mountpoint Pod image: the s3-csi-mounter entrypoint (/bin/s3-csi-mounter, the controller's
# MOUNTPOINT_COMMAND default) plus the two FUSE engines it runs from PATH:
#   - mount-s3 (AWS Mountpoint for S3; links libfuse2) from the official release tarball;
#   - rclone from Debian (its `mount2` accepts /dev/fd/N, which the fd-passing protocol needs).
# Runs as uid/gid 1000 (the controller's MOUNTPOINT_UID default); Mountpoint Pods pass the
# restricted Pod Security Standard: the FUSE fd is opened by the node plugin and passed in.
# scripts/build_images_local.ts builds the same image without docker or a registry (Deno + bundle
# + a static launcher at /bin/s3-csi-mounter, rclone from Debian, our engine from
# scripts/build_engine.sh when built): keep the entrypoint, user and labels of both in step.
ARG DENO_VERSION=2.9.6

FROM --platform=$BUILDPLATFORM denoland/deno:${DENO_VERSION} AS builder
ARG TARGETARCH
WORKDIR /src
COPY deno.json deno.lock ./
RUN deno install --frozen
COPY src/ src/
COPY scripts/ scripts/
COPY proto/ proto/
RUN case "${TARGETARCH}" in \
      amd64) target=x86_64-unknown-linux-gnu ;; \
      arm64) target=aarch64-unknown-linux-gnu ;; \
      *) echo "unsupported TARGETARCH ${TARGETARCH}" >&2; exit 1 ;; \
    esac; \
    flags=$(deno eval --quiet "import { V8_FLAGS } from './scripts/build.ts'; console.log(V8_FLAGS.mounter)"); \
    deno compile -A --frozen --no-check --target "${target}" --v8-flags="${flags}" \
      --output /out/s3-csi-mounter src/cmd/mounter/main.ts

FROM debian:bookworm-slim AS mountpoint
ARG TARGETARCH
ARG MOUNTPOINT_S3_VERSION=1.19.0
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl && \
    case "${TARGETARCH}" in amd64) arch=x86_64 ;; arm64) arch=arm64 ;; esac; \
    curl -fsSL -o /tmp/mount-s3.tar.gz \
      "https://s3.amazonaws.com/mountpoint-s3-release/${MOUNTPOINT_S3_VERSION}/${arch}/mount-s3-${MOUNTPOINT_S3_VERSION}-${arch}.tar.gz" && \
    mkdir -p /opt/mount-s3 && tar -xzf /tmp/mount-s3.tar.gz -C /opt/mount-s3 && \
    test -x /opt/mount-s3/bin/mount-s3

FROM debian:bookworm-slim
ARG VERSION=dev
ARG MOUNTPOINT_S3_VERSION=1.19.0
LABEL org.opencontainers.image.title="s3-csi-mounter" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.description="s3.csi.scality.com Mountpoint Pod: mount-s3 ${MOUNTPOINT_S3_VERSION} and rclone"
RUN apt-get update && \
    apt-get install -y --no-install-recommends ca-certificates libfuse2 rclone && \
    rm -rf /var/lib/apt/lists/* && \
    groupadd --gid 1000 mounter && useradd --uid 1000 --gid 1000 --no-create-home --shell /usr/sbin/nologin mounter
COPY --from=mountpoint /opt/mount-s3/bin/mount-s3 /usr/bin/mount-s3
COPY --from=builder /out/s3-csi-mounter /bin/s3-csi-mounter
USER 1000:1000
ENTRYPOINT ["/bin/s3-csi-mounter"]
