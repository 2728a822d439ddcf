# Hearth engine, CUDA 12.8 image. `hearth up` builds it for GPU specs with the workspace sources
# as the context (sent in memory, no target/). Two stages: the CUDA devel image compiles the
# engine with the `cuda` feature (nvcc builds the kernels' fatbin), the runtime image runs it as
# a non-root user. The model and the spec are bind-mounted read-only at run time.
ARG CUDA_VERSION=12.8.1
ARG UBUNTU=ubuntu24.04
ARG RUST_VERSION=1.95.0

# The Rust toolchain, copied into the CUDA build stage below (no installer script to fetch).
FROM rust:${RUST_VERSION}-slim-bookworm AS rust

FROM nvidia/cuda:${CUDA_VERSION}-devel-${UBUNTU} AS build
ENV CARGO_HOME=/usr/local/cargo \
    RUSTUP_HOME=/usr/local/rustup \
    CUDA_HOME=/usr/local/cuda \
    PATH=/usr/local/cargo/bin:/usr/local/cuda/bin:${PATH}
COPY --from=rust /usr/local/cargo /usr/local/cargo
COPY --from=rust /usr/local/rustup /usr/local/rustup
# Build tools from the distribution's current release; pinning their versions would only break
# the build when the archive moves on.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates gcc libc6-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The fatbin covers sm_80 (PTX) to sm_120a; see engine/kernels/build.rs.
RUN cargo build --release --locked -p hearth-server --bin hearth-engine --features cuda \
    && cargo build --release --locked -p hearth-monitor --bin hearth-monitor \
    && install -m 0755 target/release/hearth-engine target/release/hearth-monitor /usr/local/bin/

FROM nvidia/cuda:${CUDA_VERSION}-runtime-${UBUNTU}
# The runtime image brings libcudart, cuBLAS/cuBLASLt and NCCL, which the engine loads.
COPY --from=build /usr/local/bin/hearth-engine /usr/local/bin/hearth-engine
# The monitor sidecar; compose's monitor service runs it from this image.
COPY --from=build /usr/local/bin/hearth-monitor /usr/local/bin/hearth-monitor
RUN useradd --system --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin hearth \
    && mkdir -p /etc/hearth
USER 10001:10001
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=20m --retries=3 \
    CMD ["/usr/local/bin/hearth-engine", "health", "--spec", "/etc/hearth/spec.yaml"]
ENTRYPOINT ["/usr/local/bin/hearth-engine"]
CMD ["serve", "--spec", "/etc/hearth/spec.yaml"]
