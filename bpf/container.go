package bpf

import "strings"

// Container runtimes ParseCgroupPath reports.
const (
	RuntimeDocker     = "docker"
	RuntimeContainerd = "containerd"
	RuntimeCRIO       = "cri-o"
	RuntimePodman     = "podman"
	// RuntimeCRI is a container under a kubelet pod cgroup written with
	// the cgroupfs driver, whose path does not name the runtime.
	RuntimeCRI = "cri"
)

// Kubernetes QoS classes, from the kubepods level of the path.
const (
	QoSGuaranteed = "guaranteed"
	QoSBurstable  = "burstable"
	QoSBestEffort = "besteffort"
)

// Container is what a cgroup path says about the workload in it.
type Container struct {
	Runtime string // one of the Runtime* constants; "" when no container id was found
	ID      string // container id, 64 lowercase hex digits; "" for a pod-level cgroup
	PodUID  string // Kubernetes pod UID (dashes restored); "" outside a pod
	QoS     string // one of the QoS* constants; "" outside a pod
}

// ParseCgroupPath extracts the container and pod identity from a cgroup v2
// path (as CgroupResolver.Path returns it). It understands the layouts the
// common runtimes and kubelet write, with both cgroup drivers:
//
//	/docker/<id>                                                 docker, cgroupfs
//	/system.slice/docker-<id>.scope                              docker, systemd
//	/machine.slice/libpod-<id>.scope                             podman
//	/kubepods/burstable/pod<uid>/<id>                            kubelet, cgroupfs
//	/kubepods/pod<uid>/<id>                                      guaranteed pod
//	/kubepods.slice/kubepods-besteffort.slice/
//	    kubepods-besteffort-pod<uid_with_underscores>.slice/
//	    cri-containerd-<id>.scope                                kubelet, systemd
//	.../crio-<id>.scope                                          CRI-O
//
// Nested cgroups below a container (an init.scope inside it, say) still
// resolve to that container: the deepest container id on the path wins.
// CRI-O's and podman's conmon scopes are monitors, not containers, and are
// not reported as one. ok is false when the path names neither a container
// nor a pod.
func ParseCgroupPath(path string) (c Container, ok bool) {
	parts := strings.Split(path, "/")
	inKubepods := false
	for i, p := range parts {
		if p == "" {
			continue
		}
		if strings.HasPrefix(p, "kubepods") || strings.Contains(p, "-kubepods") {
			inKubepods = true
		}
		if q := qosOf(p); inKubepods && q != "" {
			c.QoS = q
		}
		if uid, ok := podUID(p); ok && inKubepods {
			c.PodUID = uid
			if c.QoS == "" {
				c.QoS = QoSGuaranteed
			}
			continue
		}
		if rt, id, ok := containerID(p); ok {
			if rt == "" {
				switch {
				case c.PodUID != "":
					rt = RuntimeCRI
				case i > 0 && parts[i-1] == "docker":
					rt = RuntimeDocker
				default:
					continue
				}
			}
			c.Runtime, c.ID = rt, id
		}
	}
	return c, c.ID != "" || c.PodUID != ""
}

// qosOf returns the QoS class named by a kubepods path element:
// "burstable" (cgroupfs) or "kubepods-burstable.slice" (systemd).
func qosOf(p string) string {
	p = strings.TrimSuffix(p, ".slice")
	for _, q := range []string{QoSBurstable, QoSBestEffort} {
		if p == q || strings.HasSuffix(p, "-"+q) {
			return q
		}
	}
	return ""
}

// podUID recognises "pod<uid>" and "<prefix>-pod<uid_>.slice"; the systemd
// driver replaces the UID's dashes with underscores.
func podUID(p string) (string, bool) {
	var raw string
	switch {
	case strings.HasSuffix(p, ".slice"):
		_, after, ok := strings.Cut(strings.TrimSuffix(p, ".slice"), "-pod")
		if !ok {
			return "", false
		}
		raw = strings.ReplaceAll(after, "_", "-")
	case strings.HasPrefix(p, "pod"):
		raw = p[len("pod"):]
	default:
		return "", false
	}
	if isUUID(raw) || (len(raw) == 32 && isHex(raw)) {
		return strings.ToLower(raw), true
	}
	return "", false
}

// containerID recognises "<64 hex>" (rt == "") and "<runtime>-<64 hex>.scope".
func containerID(p string) (rt, id string, ok bool) {
	if len(p) == 64 && isHex(p) {
		return "", strings.ToLower(p), true
	}
	base, isScope := strings.CutSuffix(p, ".scope")
	if !isScope {
		return "", "", false
	}
	for _, pre := range []struct{ prefix, runtime string }{
		{"docker-", RuntimeDocker},
		{"cri-containerd-", RuntimeContainerd},
		{"crio-", RuntimeCRIO},
		{"libpod-", RuntimePodman},
	} {
		if rest, found := strings.CutPrefix(base, pre.prefix); found && len(rest) == 64 && isHex(rest) {
			return pre.runtime, strings.ToLower(rest), true
		}
	}
	return "", "", false
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return len(s) > 0
}

// isUUID checks the 8-4-4-4-12 hex layout.
func isUUID(s string) bool {
	groups := strings.Split(s, "-")
	if len(groups) != 5 {
		return false
	}
	for i, g := range groups {
		if len(g) != [5]int{8, 4, 4, 4, 12}[i] || !isHex(g) {
			return false
		}
	}
	return true
}
