package history

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/minio/minio-go/v7"

	"github.com/tailroot/tailroot/internal/s3client"

	"github.com/tailroot/tailroot/internal/fsutil"
)

// Bucket is where history files go: a local directory or an S3-compatible
// bucket. Keys are slash-separated and relative to the bucket's prefix.
// Implementations are safe for concurrent use.
type Bucket interface {
	// Put stores data under key atomically: a reader sees the old object,
	// no object, or all of data; never a part of it.
	Put(ctx context.Context, key string, data []byte) error
	// Get returns the object's bytes; an error wrapping fs.ErrNotExist when
	// there is none.
	Get(ctx context.Context, key string) ([]byte, error)
	// Exists reports whether key holds an object.
	Exists(ctx context.Context, key string) (bool, error)
	// List returns every key under prefix (which ends in "/"), recursively,
	// in no particular order.
	List(ctx context.Context, prefix string) ([]string, error)
	// String describes the bucket for logs and errors.
	String() string
}

// DirBucket keeps history in a local directory (a mounted share works too).
type DirBucket struct{ dir string }

// NewDirBucket creates dir if needed.
func NewDirBucket(dir string) (*DirBucket, error) {
	if dir == "" {
		return nil, errors.New("history directory is empty")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("history directory: %w", err)
	}
	return &DirBucket{dir: filepath.Clean(dir)}, nil
}

func (b *DirBucket) path(key string) (string, error) {
	if key == "" || strings.HasPrefix(key, "/") || strings.Contains(key, "\\") || path.Clean(key) != key || strings.HasPrefix(key, "../") || key == ".." {
		return "", fmt.Errorf("history key %q is not a clean relative path", key)
	}
	return filepath.Join(b.dir, filepath.FromSlash(key)), nil
}

// Put writes key through a temporary file, fsync, rename and directory
// fsync (fsutil.WriteFileAtomic), creating and syncing missing directories.
func (b *DirBucket) Put(_ context.Context, key string, data []byte) error {
	p, err := b.path(key)
	if err != nil {
		return err
	}
	dir := filepath.Dir(p)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("put %s: %w", key, err)
		}
		// Make the new directory entries durable up to the root.
		for d := dir; d != b.dir && strings.HasPrefix(d, b.dir); d = filepath.Dir(d) {
			if err := fsutil.SyncDir(filepath.Dir(d)); err != nil {
				return fmt.Errorf("put %s: %w", key, err)
			}
		}
	}
	if err := fsutil.WriteFileAtomic(dir, filepath.Base(p), data); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

// Get reads key.
func (b *DirBucket) Get(_ context.Context, key string) ([]byte, error) {
	p, err := b.path(key)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	return data, nil
}

// Exists stats key.
func (b *DirBucket) Exists(_ context.Context, key string) (bool, error) {
	p, err := b.path(key)
	if err != nil {
		return false, err
	}
	_, err = os.Stat(p)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("stat %s: %w", key, err)
	}
}

// List walks prefix; temporary files of an interrupted Put are not listed.
func (b *DirBucket) List(_ context.Context, prefix string) ([]string, error) {
	root := filepath.Join(b.dir, filepath.FromSlash(prefix))
	var keys []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == root {
				return filepath.SkipDir
			}
			return err
		}
		if d.IsDir() || strings.HasSuffix(p, ".tmp") {
			return nil
		}
		rel, err := filepath.Rel(b.dir, p)
		if err != nil {
			return err
		}
		keys = append(keys, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	return keys, nil
}

func (b *DirBucket) String() string { return b.dir }

// S3Options configure an S3Bucket (internal/s3client.Options; Prefix gets a
// trailing "/" when missing).
type S3Options = s3client.Options

// S3Bucket keeps history in an S3-compatible bucket through minio-go. A
// PUT is atomic on S3, so Put needs no temporary object.
type S3Bucket struct {
	client *minio.Client
	opts   S3Options
}

// NewS3Bucket validates o and builds the client; it does not contact the
// service.
func NewS3Bucket(o S3Options) (*S3Bucket, error) {
	if o.Prefix != "" && !strings.HasSuffix(o.Prefix, "/") {
		o.Prefix += "/"
	}
	c, err := s3client.New("history s3", o)
	if err != nil {
		return nil, err
	}
	return &S3Bucket{client: c, opts: o}, nil
}

// Put uploads data with one PUT.
func (b *S3Bucket) Put(ctx context.Context, key string, data []byte) error {
	_, err := b.client.PutObject(ctx, b.opts.Bucket, b.opts.Prefix+key, bytes.NewReader(data), int64(len(data)),
		minio.PutObjectOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return fmt.Errorf("put s3://%s/%s%s: %w", b.opts.Bucket, b.opts.Prefix, key, err)
	}
	return nil
}

// Get downloads key.
func (b *S3Bucket) Get(ctx context.Context, key string) ([]byte, error) {
	o, err := b.client.GetObject(ctx, b.opts.Bucket, b.opts.Prefix+key, minio.GetObjectOptions{})
	if err != nil {
		return nil, b.wrap("get", key, err)
	}
	defer o.Close()
	data, err := io.ReadAll(o)
	if err != nil {
		return nil, b.wrap("get", key, err)
	}
	return data, nil
}

// Exists issues a HEAD.
func (b *S3Bucket) Exists(ctx context.Context, key string) (bool, error) {
	_, err := b.client.StatObject(ctx, b.opts.Bucket, b.opts.Prefix+key, minio.StatObjectOptions{})
	if err == nil {
		return true, nil
	}
	if err := b.wrap("stat", key, err); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else {
		return false, err
	}
}

// List lists recursively under prefix.
func (b *S3Bucket) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	full := b.opts.Prefix + prefix
	for o := range b.client.ListObjects(ctx, b.opts.Bucket, minio.ListObjectsOptions{Prefix: full, Recursive: true}) {
		if o.Err != nil {
			return nil, fmt.Errorf("list s3://%s/%s: %w", b.opts.Bucket, full, o.Err)
		}
		keys = append(keys, strings.TrimPrefix(o.Key, b.opts.Prefix))
	}
	return keys, nil
}

func (b *S3Bucket) String() string { return "s3://" + b.opts.Bucket + "/" + b.opts.Prefix }

// wrap maps a missing object onto fs.ErrNotExist.
func (b *S3Bucket) wrap(op, key string, err error) error {
	if r := minio.ToErrorResponse(err); r.Code == "NoSuchKey" || r.StatusCode == 404 {
		return fmt.Errorf("%s s3://%s/%s%s: %w", op, b.opts.Bucket, b.opts.Prefix, key, fs.ErrNotExist)
	}
	return fmt.Errorf("%s s3://%s/%s%s: %w", op, b.opts.Bucket, b.opts.Prefix, key, err)
}
