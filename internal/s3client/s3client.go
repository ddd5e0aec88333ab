// Package s3client is the one place tailroot builds a client for an
// S3-compatible object store (attribution report uploads, request-record
// Parquet history), with minio-go.
//
// In: Options, the flag-level description of a bucket. Out: a
// *minio.Client. Holds: credentials never come from flags: given in
// Options or, when both keys are empty, from the environment
// (AWS_ACCESS_KEY_ID …, MINIO_ACCESS_KEY …) or the instance's IAM role, so
// they stay out of /api/v1/status/flags and ps.
package s3client

import (
	"fmt"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Options describe a bucket. Every field says what zero means.
type Options struct {
	// Endpoint is host[:port] of the S3-compatible service (s3.amazonaws.com,
	// a MinIO, Ceph RGW or R2 host). Required.
	Endpoint string
	// Bucket is the bucket. Required; it must exist.
	Bucket string
	// Prefix is prepended to every key ("" stores at the bucket root).
	Prefix string
	// Region is the bucket's region; "" lets the client discover it.
	Region string
	// AccessKeyID and SecretAccessKey sign requests; when both are empty
	// the credentials come from the environment or the instance's IAM role.
	AccessKeyID, SecretAccessKey string
	// Insecure talks plain HTTP instead of HTTPS.
	Insecure bool
	// PathStyle addresses the bucket in the path (host/bucket/key) rather
	// than the host name (bucket.host/key), as MinIO and most self-hosted
	// services need.
	PathStyle bool
}

// New validates o and builds the client; it does not contact the service.
// what names the user of the bucket in errors.
func New(what string, o Options) (*minio.Client, error) {
	if o.Endpoint == "" || o.Bucket == "" {
		return nil, fmt.Errorf("%s: endpoint %q and bucket %q are required", what, o.Endpoint, o.Bucket)
	}
	var creds *credentials.Credentials
	if o.AccessKeyID == "" && o.SecretAccessKey == "" {
		creds = credentials.NewChainCredentials([]credentials.Provider{&credentials.EnvAWS{}, &credentials.EnvMinio{}, &credentials.IAM{}})
	} else {
		creds = credentials.NewStaticV4(o.AccessKeyID, o.SecretAccessKey, "")
	}
	lookup := minio.BucketLookupAuto
	if o.PathStyle {
		lookup = minio.BucketLookupPath
	}
	c, err := minio.New(o.Endpoint, &minio.Options{Creds: creds, Secure: !o.Insecure, Region: o.Region, BucketLookup: lookup})
	if err != nil {
		return nil, fmt.Errorf("%s: endpoint %q: %w", what, o.Endpoint, err)
	}
	return c, nil
}
