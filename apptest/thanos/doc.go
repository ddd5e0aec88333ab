// Package thanos holds tailroot's end-to-end tests inside a real Thanos
// deployment: tailroot servers behind unchanged Thanos sidecars uploading
// to a filesystem bucket, Thanos Store and Compact on the bucket, Thanos
// Query over all of them. The processes and helpers live in
// apptest/internal/thanos.
package thanos
