# The groupexec gateway as a container image: a static binary on an empty
# base, run as an unprivileged user.
#
#   docker build -t groupexec .
#   docker run --rm -p 8080:8080 -p 127.0.0.1:9090:9090 \
#     -v "$PWD/gateway.yaml:/etc/groupexec/gateway.yaml:ro" groupexec
#
# The config must listen on 0.0.0.0 (not the sample's 127.0.0.1) to be
# reachable from outside the container. The admin port (/metrics, POST
# /reload) asks no credentials: publish it to the host's loopback, as
# above, or to the scraper's network only. SIGTERM (docker stop) drains it;
# give docker stop a --time longer than drain_delay + drain_timeout.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=devel
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" \
    -o /out/groupexec ./cmd/groupexec \
 && /out/groupexec version \
 && mkdir -m 0700 /out/tmp

FROM scratch
# Root certificates, for https backends.
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/groupexec /usr/local/bin/groupexec
# The system's temporary directory, body.spool_dir's default: scratch has
# none, and without it every body over body.buffer_bytes would be refused
# 500 spool_failed.
COPY --from=build --chown=65532:65532 /out/tmp /tmp
USER 65532:65532
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/groupexec"]
CMD ["gateway", "--config", "/etc/groupexec/gateway.yaml"]
