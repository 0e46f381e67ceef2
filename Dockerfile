# syntax=docker/dockerfile:1
# One image, five binaries: myownshell-controller, myownshell-webhook, myownshell-gateway,
# myownshell-rbac-proxy, and myownshell-session (the session holder every shell pod copies from
# this image and runs in its own, which may have no libc: static, as all of them are here); and
# the gateway page's JavaScript (xterm.js), installed by npm from
# gateway/web/package-lock.json (never copied into the repository).
# Build:  docker build -t ghcr.io/myownshell/myownshell:0.1.0 .
# Then point kustomize at it: cd config/default && kustomize edit set image ghcr.io/myownshell/myownshell=…

FROM node:20-bookworm AS web
WORKDIR /web
COPY gateway/web/package.json gateway/web/package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund

FROM rust:1.95-bookworm AS build
WORKDIR /src
# Static musl binaries: the runtime image needs no libc. ring's C parts need musl-gcc.
RUN apt-get update && apt-get install -y --no-install-recommends musl-tools && rm -rf /var/lib/apt/lists/* \
 && rustup target add x86_64-unknown-linux-musl
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --target x86_64-unknown-linux-musl \
      -p myownshell-controller -p myownshell-webhook -p myownshell-gateway -p myownshell-rbac-proxy \
      -p myownshell-session \
 && mkdir /out \
 && cp target/x86_64-unknown-linux-musl/release/myownshell-controller \
       target/x86_64-unknown-linux-musl/release/myownshell-webhook \
       target/x86_64-unknown-linux-musl/release/myownshell-gateway \
       target/x86_64-unknown-linux-musl/release/myownshell-rbac-proxy \
       target/x86_64-unknown-linux-musl/release/myownshell-session /out/

# distroless/static: no shell, no package manager; "nonroot" is uid 65532.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /
COPY --from=web /web/node_modules/@xterm /usr/share/myownshell-gateway/node_modules/@xterm
USER 65532:65532
ENTRYPOINT ["/myownshell-controller"]
