# syntax=docker/dockerfile:1
#
# The coordinator image: two static binaries on distroless, nonroot.
#   /coordinator      the service (REST :8080, gRPC :9090)
#   /coordinator-sim  the simulator (gateway, workers, render service), which
#                     deploy/overlays/dev runs as worker and render pods
#
#   docker build -t coordinator:dev .
#
# deploy/dockerfile_test.go checks this file's shape (stages, CGO_ENABLED=0,
# nonroot, ports, the Go version against go.mod).

ARG GO_VERSION=1.26.8

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0
# Modules first, so source edits reuse the download layer.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
ARG TARGETOS
ARG TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    GOOS=${TARGETOS} GOARCH=${TARGETARCH} CGO_ENABLED=0 \
    go build -trimpath -ldflags="-s -w" -o /out/coordinator ./cmd/coordinator && \
    GOOS=${TARGETOS} GOARCH=${TARGETARCH} CGO_ENABLED=0 \
    go build -trimpath -ldflags="-s -w" -o /out/coordinator-sim ./cmd/coordinator-sim

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/coordinator /out/coordinator-sim /
# The annotated sample config, so the image starts on its own; Kubernetes
# mounts the real one over /config/coordinator (deploy/base).
COPY config/coordinator/coordinator.yaml /config/coordinator/coordinator.yaml
USER nonroot:nonroot
EXPOSE 8080 9090
ENTRYPOINT ["/coordinator"]
CMD ["--config", "/config/coordinator/coordinator.yaml"]
