// Package storepb is the generated Go code of the Thanos StoreAPI protocol
// (the .proto files beside it, copied from Thanos v0.42.5 without the
// gogoproto options): the client messages and the Store service stub that
// query/remote uses to read series from a Thanos Query, Store, Sidecar or
// Receive over gRPC.
//
// It is generated with protoc and the protoc-gen-go / protoc-gen-go-grpc
// tools pinned in go.mod, rather than imported from Thanos, whose Go
// packages need the slicelabels build tag on the whole binary.
package storepb

//go:generate sh gen.sh
