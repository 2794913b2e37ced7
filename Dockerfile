# model-runtime: a small runtime image with the release binary, run as a non-root user.
#
#   docker build -t model-runtime .
#   docker run -p 50051:50051 model-runtime                       # the embedded default config
#   docker run -p 50051:50051 -v "$PWD/config.toml:/etc/model-runtime/config.toml:ro" model-runtime
#
# The build stage is the toolchain CI uses (Rust 1.95) building the locked dependency tree.

FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin model-runtime

FROM debian:bookworm-slim
# The user the server runs as: no shell, no home, no password.
RUN useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin model-runtime
COPY --from=build /src/target/release/model-runtime /usr/local/bin/model-runtime
COPY deploy/config.toml /etc/model-runtime/config.toml
USER 10001
EXPOSE 50051
# The gRPC health protocol: exit 0 only when the server answers SERVING (NOT_SERVING while it
# drains or after its store failed).
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["model-runtime", "health", "--addr", "127.0.0.1:50051", "--timeout", "2s"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["model-runtime", "serve"]
CMD ["--config", "/etc/model-runtime/config.toml"]
