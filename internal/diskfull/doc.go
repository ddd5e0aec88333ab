// Package diskfull gives tests a small filesystem they can fill: a tmpfs of
// a chosen size (mounting needs root; tests skip with the reason otherwise)
// and a ballast file that takes every free byte until it is removed. The
// durability tests use it to make the WAL, the record store and the
// evidence store meet ENOSPC at a moment the test chooses.
package diskfull
