package symbolize

import (
	"io/fs"
	"syscall"
)

func statKey(st fs.FileInfo, path string) fileKey {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return fileKey{dev: sys.Dev, ino: sys.Ino}
	}
	return fileKey{path: path}
}
