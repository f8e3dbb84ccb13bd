# syntax=docker/dockerfile:1
#
# One image, three static binaries: producer, consumer, registry-sandbox.
# docker-compose.yml picks the binary with `command:`; one image means one
# build, one scan and one tag to roll out for the whole system.
#
#   make image                                         # docker build, stamped with git's version
#   docker run --rm bulkreg:local producer help        # the subcommands
#   docker run --rm bulkreg:local consumer --version   # the version, commit and date stamped
#   docker run --rm -e BULKREG_KAFKA_BROKERS=... bulkreg:local   # a consumer

# GO_VERSION is the toolchain go.mod pins (its toolchain line; internal/
# buildinfo's test holds the two together), so the image's standard library
# is the one `make vulncheck` checked. The build stage runs on a golang image
# named by digest, and its go fetches that toolchain through the module
# proxy (GOTOOLCHAIN), checked against the Go checksum database as any
# module is: the image's own go release need not be the pinned one, and a
# newer pin needs no new base image. docs/dependencies.md ("Base images")
# says how every digest here is looked up and refreshed.
ARG GO_VERSION=1.26.11

FROM golang:1.26.8@sha256:6c2a5538f964f1c82f97ad14988bf05de100d922d159d0e398b54c7b0ca0c6c9 AS build
ARG GO_VERSION
ENV GOTOOLCHAIN=go${GO_VERSION}
WORKDIR /src
# Modules first, so a code change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# The build context has no .git (.dockerignore), so the Go toolchain cannot
# stamp the commit: `make image` and docker-compose.yml pass what git says
# as build arguments, and the linker writes them into internal/buildinfo
# (--version, bulkreg_build_info). Left empty, a binary says "(devel)
# revision unknown".
ARG VERSION=
ARG COMMIT=
ARG DATE=
# CGO_ENABLED=0: fully static binaries, so the final image needs no libc.
# -trimpath: no build-machine paths in the binaries (reproducible, no leaks).
# -s -w: no symbol table or DWARF; about a third smaller. Stack traces keep
# function names and lines (they come from pclntab, which -s keeps).
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -o /out/ -ldflags "-s -w \
        -X github.com/bulkreg/bulkreg/internal/buildinfo.version=${VERSION} \
        -X github.com/bulkreg/bulkreg/internal/buildinfo.commit=${COMMIT} \
        -X github.com/bulkreg/bulkreg/internal/buildinfo.date=${DATE}" \
        ./cmd/producer ./cmd/consumer ./cmd/registry-sandbox

# The health checks need an HTTP client inside the container, and
# distroless has no shell and no curl. Rather than give up distroless (or
# add a "healthcheck" mode to every binary), we copy ONE static busybox
# binary in under the name `wget`: busybox picks the applet from argv[0], so
# in the final image it can only be wget — there is still no shell. wget
# exits non-zero on a 503, which is what /healthz answers when unhealthy.
FROM busybox:1.37-musl@sha256:fc6dddc4c44b1bfe37f41cae8e67d1693828e8f42a91862816d7953e2c9d3f23 AS wget

# distroless/static: CA certificates (HTTPS to the real registration API),
# /etc/passwd with the nonroot user (65532), tzdata, and nothing else.
FROM gcr.io/distroless/static-debian12:nonroot@sha256:d093aa3e30dbadd3efe1310db061a14da60299baff8450a17fe0ccc514a16639
ARG VERSION=
ARG COMMIT=
ARG DATE=
LABEL org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.created="${DATE}"
COPY --from=wget /bin/busybox /usr/local/bin/wget
COPY --from=build /out/producer /out/consumer /out/registry-sandbox /usr/local/bin/
USER 65532:65532
# producer serve (HTTP uploads), consumer /metrics + /healthz, registry-sandbox.
EXPOSE 8080 9464 8081
# No ENTRYPOINT: `docker run IMAGE consumer` or `... producer serve`. The
# default runs a consumer configured by its BULKREG_* environment, the most
# replicated service; it never prints settings, and -h masks every secret.
CMD ["consumer"]
