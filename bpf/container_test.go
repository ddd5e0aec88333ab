package bpf

import (
	"strings"
	"testing"
)

const (
	cid  = "3f1d1b0f0c0e4d8a9b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f50"
	puid = "0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"
)

func TestParseCgroupPath(t *testing.T) {
	under := strings.ReplaceAll(puid, "-", "_")
	cases := []struct {
		name string
		path string
		want Container
		ok   bool
	}{
		{"docker cgroupfs", "/docker/" + cid, Container{Runtime: RuntimeDocker, ID: cid}, true},
		{"docker systemd", "/system.slice/docker-" + cid + ".scope", Container{Runtime: RuntimeDocker, ID: cid}, true},
		{"docker nested init scope", "/system.slice/docker-" + cid + ".scope/init.scope", Container{Runtime: RuntimeDocker, ID: cid}, true},
		{"podman", "/machine.slice/libpod-" + cid + ".scope", Container{Runtime: RuntimePodman, ID: cid}, true},
		{"podman conmon is not a container", "/machine.slice/libpod-conmon-" + cid + ".scope", Container{}, false},
		{
			"k8s cgroupfs burstable", "/kubepods/burstable/pod" + puid + "/" + cid,
			Container{Runtime: RuntimeCRI, ID: cid, PodUID: puid, QoS: QoSBurstable},
			true,
		},
		{
			"k8s cgroupfs guaranteed", "/kubepods/pod" + puid + "/" + cid,
			Container{Runtime: RuntimeCRI, ID: cid, PodUID: puid, QoS: QoSGuaranteed},
			true,
		},
		{
			"k8s systemd containerd besteffort", "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + under + ".slice/cri-containerd-" + cid + ".scope",
			Container{Runtime: RuntimeContainerd, ID: cid, PodUID: puid, QoS: QoSBestEffort},
			true,
		},
		{
			"k8s systemd guaranteed crio", "/kubepods.slice/kubepods-pod" + under + ".slice/crio-" + cid + ".scope",
			Container{Runtime: RuntimeCRIO, ID: cid, PodUID: puid, QoS: QoSGuaranteed},
			true,
		},
		{
			"crio conmon keeps only the pod", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + under + ".slice/crio-conmon-" + cid + ".scope",
			Container{PodUID: puid, QoS: QoSBurstable},
			true,
		},
		{
			"pod level cgroup", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + under + ".slice",
			Container{PodUID: puid, QoS: QoSBurstable},
			true,
		},
		{
			"kind nested kubelet root", "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod" + under + ".slice/cri-containerd-" + cid + ".scope",
			Container{Runtime: RuntimeContainerd, ID: cid, PodUID: puid, QoS: QoSBestEffort},
			true,
		},
		{
			"static pod 32-hex uid", "/kubepods/burstable/pod0123456789abcdef0123456789abcdef/" + cid,
			Container{Runtime: RuntimeCRI, ID: cid, PodUID: "0123456789abcdef0123456789abcdef", QoS: QoSBurstable},
			true,
		},
		{"uppercase id lowered", "/docker/" + strings.ToUpper(cid), Container{Runtime: RuntimeDocker, ID: cid}, true},
		{"root", "/", Container{}, false},
		{"user session", "/user.slice/user-1000.slice/session-2.scope", Container{}, false},
		{"bare hex outside docker and pods", "/something/" + cid, Container{}, false},
		{"pod word outside kubepods", "/pod" + puid, Container{}, false},
		{"63 hex is not an id", "/docker/" + cid[:63], Container{}, false},
		{"bad uuid groups", "/kubepods/pod0a1b2c3d4-e5f-6a7b-8c9d-0e1f2a3b4c5d/" + cid, Container{Runtime: "", ID: ""}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := ParseCgroupPath(c.path)
			if got != c.want || ok != c.ok {
				t.Fatalf("ParseCgroupPath(%q) = %+v, %v; want %+v, %v", c.path, got, ok, c.want, c.ok)
			}
		})
	}
}

func FuzzParseCgroupPath(f *testing.F) {
	f.Add("/docker/" + cid)
	f.Add("/kubepods.slice/kubepods-pod" + strings.ReplaceAll(puid, "-", "_") + ".slice/crio-" + cid + ".scope")
	f.Add("/kubepods/burstable/pod" + puid + "/" + cid)
	f.Fuzz(func(t *testing.T, p string) {
		c, ok := ParseCgroupPath(p)
		if ok != (c.ID != "" || c.PodUID != "") {
			t.Fatalf("ok %v for %+v", ok, c)
		}
		if c.ID != "" && (len(c.ID) != 64 || !isHex(c.ID) || strings.ToLower(c.ID) != c.ID || c.Runtime == "") {
			t.Fatalf("bad id %+v from %q", c, p)
		}
		if c.PodUID != "" && !isUUID(c.PodUID) && len(c.PodUID) != 32 {
			t.Fatalf("bad pod uid %q from %q", c.PodUID, p)
		}
	})
}
