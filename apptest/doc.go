// Package apptest starts the real tailroot binary in a child process and
// talks to it over HTTP, so tests see what users see: flags, signals,
// restarts and the wire formats.
package apptest
