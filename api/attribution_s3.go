package api

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/minio/minio-go/v7"

	"github.com/tailroot/tailroot/internal/s3client"
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

// S3Options configures S3Uploader (internal/s3client.Options).
type S3Options = s3client.Options

// S3Uploader uploads reports with minio-go, a maintained client for any
// S3-compatible store.
type S3Uploader struct {
	client *minio.Client
	opts   S3Options
}

// NewS3Uploader validates o and builds the client; it does not contact the
// service.
func NewS3Uploader(o S3Options) (*S3Uploader, error) {
	c, err := s3client.New("s3 uploader", o)
	if err != nil {
		return nil, err
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
