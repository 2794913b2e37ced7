# model-runtime: a small runtime image with the release binary, run as a non-root user.
#
#   docker build -t model-runtime:0.1.0 --build-arg COMMIT="$(git rev-parse --short HEAD)" .
#   docker run -p 50051:50051 model-runtime:0.1.0                  # the embedded default config
#   docker run -p 50051:50051 -v "$PWD/config.toml:/etc/model-runtime/config.toml:ro" \
#     -e OPENAI_API_KEY model-runtime:0.1.0                        # your own config
#
# The tag is the crate's version (Cargo.toml); the Kubernetes manifests name the same image.
# The build stage is the toolchain CI uses (Rust 1.95) building the locked dependency tree.

FROM rust:1.95-slim-bookworm AS build
# The commit `model-runtime --version` shows (.git is not sent to the build).
ARG COMMIT=unknown
ENV MODEL_RUNTIME_COMMIT=$COMMIT
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin model-runtime

FROM debian:bookworm-slim
# The CA certificates every https:// provider is verified against (OpenAI, Anthropic, Gemini,
# Vertex AI, Bedrock, Azure): without them `serve` stops at start for any of them.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
# The user the server runs as: no shell, no home, no password.
RUN useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin model-runtime
COPY --from=build /src/target/release/model-runtime /usr/local/bin/model-runtime
COPY deploy/config.toml /etc/model-runtime/config.toml
USER 10001
# Every interface, whatever `server.listen` a mounted config says (most say 127.0.0.1, which
# nothing outside the container reaches). Set it to another address, or to "" to use the
# config's own.
ENV MODEL_RUNTIME_LISTEN=0.0.0.0:50051
EXPOSE 50051
# The gRPC health protocol: exit 0 only when the server answers SERVING (NOT_SERVING while it
# drains or after its store failed).
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["model-runtime", "health", "--addr", "127.0.0.1:50051", "--timeout", "2s"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["model-runtime", "serve"]
CMD ["--config", "/etc/model-runtime/config.toml"]
