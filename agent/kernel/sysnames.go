package kernel

import "strconv"

// SyscallName returns the name of system call nr of this architecture
// ("read", "futex"), or "sys_<nr>" when the table does not have it.
func SyscallName(nr uint32) string {
	if int(nr) < len(syscallNames) && syscallNames[nr] != "" {
		return syscallNames[nr]
	}
	return "sys_" + strconv.FormatUint(uint64(nr), 10)
}
