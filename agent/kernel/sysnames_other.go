//go:build !amd64

package kernel

// syscallNames is empty off x86-64: system calls are labelled by number.
var syscallNames = [...]string{}
