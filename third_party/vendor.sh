#!/usr/bin/env bash
# Re-vendors the third-party .proto files our API imports into third_party/proto.
# The buf schema registry is not reachable from our machines, so the files come
# from Go modules on the module proxy, at the versions pinned below.
set -euo pipefail
cd "$(dirname "$0")/.."

modpath() { go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'; }

validate=$(modpath github.com/bufbuild/protovalidate@v1.2.2)
gateway_v1=$(modpath github.com/grpc-ecosystem/grpc-gateway@v1.16.0)

out=third_party/proto
rm -rf "$out"
mkdir -p "$out/buf/validate" "$out/google/api"
install -m 0644 "$validate/proto/protovalidate/buf/validate/validate.proto" "$out/buf/validate/"
for f in annotations http httpbody; do
  install -m 0644 "$gateway_v1/third_party/googleapis/google/api/$f.proto" "$out/google/api/"
done
echo "vendored into $out"
