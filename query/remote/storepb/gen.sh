#!/bin/sh
# Regenerates the StoreAPI Go code with protoc (Debian: protobuf-compiler)
# and the protoc-gen-go / protoc-gen-go-grpc versions pinned in go.mod.
set -eu
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
go build -o "$d/" google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc
# Paths are relative to the repository root so that the registered file
# names (query/remote/storepb/*.proto) cannot collide with another package's.
cd ../../..
PATH="$d:$PATH" protoc -I . \
	--go_out=. --go_opt=paths=source_relative \
	--go-grpc_out=. --go-grpc_opt=paths=source_relative \
	query/remote/storepb/types.proto query/remote/storepb/rpc.proto
# The repository's lint runs gofumpt over every Go file.
go tool gofumpt -w query/remote/storepb/*.pb.go
