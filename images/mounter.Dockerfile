# syntax=docker/dockerfile:1.7
# Mountpoint Pod image: the s3-csi-mounter entrypoint (/bin/s3-csi-mounter, the controller's
# MOUNTPOINT_COMMAND default), the supervisor it execs into once it has the FUSE fd
# (s3-csi-supervisor, same crate as mount-s3: keeps the fd, restarts the engine), plus the two FUSE
# engines it runs from PATH:
#   - mount-s3: our engine (src/engine, on the Mountpoint crates mountpoint-s3-fs and
#     mountpoint-s3-client; links libfuse2), built in the `engine` stage below from the Rust
#     registry with Debian's Rust toolchain — nothing is downloaded from outside package registries;
#   - rclone from Debian (its `mount2` accepts /dev/fd/N, which the fd-passing protocol needs).
# Runs as uid/gid 1000 (the controller's MOUNTPOINT_UID default); Mountpoint Pods pass the
# restricted Pod Security Standard: the FUSE fd is opened by the node plugin and passed in.
# scripts/build_images_local.ts builds the same image without docker or a registry (Deno + bundle
# + a static launcher at /bin/s3-csi-mounter, rclone from Debian, our engine from
# scripts/build_engine.sh, the same crate): keep the entrypoint, user and labels of both in step.
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

# The engine, built for the target platform (under emulation when cross-building). Debian 12's
# cargo-web/rustc-web (bookworm-security; /usr/bin/cargo) is the Debian toolchain that reaches the
# crate's rust-version; the build dependencies are those of scripts/setup.sh (libfuse, bindgen's libclang,
# the CRT's cmake). Crates come from the Rust registry, pinned by Cargo.lock (--locked).
FROM debian:bookworm-slim AS engine
RUN apt-get update && \
    apt-get install -y --no-install-recommends ca-certificates cargo-web rustc-web \
      libfuse-dev libclang-dev pkg-config cmake gcc g++ libc6-dev make && \
    rm -rf /var/lib/apt/lists/*
WORKDIR /src/engine
COPY src/engine/ ./
RUN cargo build --release --locked --bins && \
    install -D -m 0755 target/release/mount-s3 /out/mount-s3 && \
    install -D -m 0755 target/release/s3-csi-supervisor /out/s3-csi-supervisor && \
    /out/mount-s3 --version

FROM debian:bookworm-slim
ARG VERSION=dev
LABEL org.opencontainers.image.title="s3-csi-mounter" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.description="s3.csi.scality.com Mountpoint Pod: mount-s3 (src/engine) and rclone"
RUN apt-get update && \
    apt-get install -y --no-install-recommends ca-certificates libfuse2 rclone && \
    rm -rf /var/lib/apt/lists/* && \
    groupadd --gid 1000 mounter && useradd --uid 1000 --gid 1000 --no-create-home --shell /usr/sbin/nologin mounter
COPY --from=engine /out/mount-s3 /usr/bin/mount-s3
COPY --from=engine /out/s3-csi-supervisor /usr/bin/s3-csi-supervisor
COPY --from=builder /out/s3-csi-mounter /bin/s3-csi-mounter
USER 1000:1000
ENTRYPOINT ["/bin/s3-csi-mounter"]
