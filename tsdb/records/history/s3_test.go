package history

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// newFakeS3 starts gofakes3, an in-process server of the S3 protocol, and
// returns an S3Bucket on it: the same minio-go requests a real bucket gets.
func newFakeS3(t *testing.T, bucket, prefix string) *S3Bucket {
	t.Helper()
	backend := s3mem.New()
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	if err := backend.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	b, err := NewS3Bucket(S3Options{
		Endpoint: strings.TrimPrefix(srv.URL, "http://"), Bucket: bucket, Prefix: prefix, Region: "us-east-1",
		AccessKeyID: "test", SecretAccessKey: "testsecret", Insecure: true, PathStyle: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestS3Bucket(t *testing.T) {
	ctx := context.Background()
	b := newFakeS3(t, "history", "fleet")
	if ok, err := b.Exists(ctx, "a/b.json"); err != nil || ok {
		t.Fatalf("exists before put: %v %v", ok, err)
	}
	if _, err := b.Get(ctx, "a/b.json"); err == nil {
		t.Fatal("get of a missing key succeeded")
	}
	for _, k := range []string{"a/b.json", "a/c/d.parquet", "e.parquet"} {
		if err := b.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := b.Exists(ctx, "a/b.json"); err != nil || !ok {
		t.Fatalf("exists after put: %v %v", ok, err)
	}
	got, err := b.Get(ctx, "a/c/d.parquet")
	if err != nil || string(got) != "a/c/d.parquet" {
		t.Fatalf("get %q %v", got, err)
	}
	keys, err := b.List(ctx, "a/")
	if err != nil || len(keys) != 2 {
		t.Fatalf("list a/: %v %v", keys, err)
	}
	for _, k := range keys {
		if k != "a/b.json" && k != "a/c/d.parquet" {
			t.Fatalf("list a/: key %q not relative to the prefix", k)
		}
	}
}
