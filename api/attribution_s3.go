package api

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// ReportUploader stores a finished report. Implementations must be safe for
// concurrent use.
type ReportUploader interface {
	// Upload stores body under key and says where it went.
	Upload(ctx context.Context, key string, body []byte) (UploadInfo, error)
}

// UploadInfo locates an uploaded report.
type UploadInfo struct {
	// URL is s3://bucket/key.
	URL string `json:"url"`
	// ETag is the store's entity tag of the object.
	ETag string `json:"etag"`
}

// S3Options configures S3Uploader. Every field says what zero means.
type S3Options struct {
	// Endpoint is host[:port] of the S3-compatible service (s3.amazonaws.com,
	// a MinIO, Ceph RGW or R2 host). Required.
	Endpoint string
	// Bucket receives the reports. Required; it must exist.
	Bucket string
	// Prefix is prepended to every key ("" stores at the bucket root).
	Prefix string
	// Region is the bucket's region; "" lets the client discover it.
	Region string
	// AccessKeyID and SecretAccessKey sign requests; when both are empty
	// the credentials come from the environment (AWS_ACCESS_KEY_ID …,
	// MINIO_ACCESS_KEY …) or the instance's IAM role.
	AccessKeyID, SecretAccessKey string
	// Insecure talks plain HTTP instead of HTTPS.
	Insecure bool
	// PathStyle addresses the bucket in the path (host/bucket/key) rather
	// than the host name (bucket.host/key), as MinIO and most self-hosted
	// services need.
	PathStyle bool
}

// S3Uploader uploads reports with minio-go, a maintained client for any
// S3-compatible store.
type S3Uploader struct {
	client *minio.Client
	opts   S3Options
}

// NewS3Uploader validates o and builds the client; it does not contact the
// service.
func NewS3Uploader(o S3Options) (*S3Uploader, error) {
	if o.Endpoint == "" || o.Bucket == "" {
		return nil, fmt.Errorf("s3 uploader: endpoint %q and bucket %q are required", o.Endpoint, o.Bucket)
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
		return nil, fmt.Errorf("s3 uploader: endpoint %q: %w", o.Endpoint, err)
	}
	return &S3Uploader{client: c, opts: o}, nil
}

// Upload puts body at Prefix+key as application/json.
func (u *S3Uploader) Upload(ctx context.Context, key string, body []byte) (UploadInfo, error) {
	k := strings.TrimPrefix(u.opts.Prefix+key, "/")
	info, err := u.client.PutObject(ctx, u.opts.Bucket, k, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{ContentType: "application/json"})
	if err != nil {
		return UploadInfo{}, fmt.Errorf("upload report to s3://%s/%s: %w", u.opts.Bucket, k, err)
	}
	return UploadInfo{URL: "s3://" + u.opts.Bucket + "/" + k, ETag: info.ETag}, nil
}
