package rca

import "testing"

func TestJoinHosts(t *testing.T) {
	in := []map[string]string{
		{"instance": "gpu-1:8000", "job": "vllm"},
		{"instance": "10.0.0.7:9400", "Hostname": "GPU-1", "UUID": "GPU-abc"},
		{"instance": "gpu-1:9100"},
		{"gpu_uuid": "GPU-abc"},
		{"instance": "[fe80::1]:9100"},
		{"instance": "http://gpu-2:9100/metrics"},
		{"kubernetes_node": "ip-10-0-1-7", "instance": "10.1.2.3:8080"},
		{"node": "ip-10-0-1-8"},
		{"node": "gpu_clock", "pod": "vllm-0"},
		{"job": "fleet"},
		{"instance": "gpu-3"},
	}
	want := []Join{
		{"gpu-1", "instance gpu-1:8000 without port"},
		{"gpu-1", "Hostname label"},
		{"gpu-1", "instance gpu-1:9100 without port"},
		{"gpu-1", "GPU gpu_uuid GPU-abc"},
		{"fe80::1", "instance [fe80::1]:9100 without port"},
		{"gpu-2", "instance http://gpu-2:9100/metrics without port"},
		{"ip-10-0-1-7", "kubernetes_node label"},
		{"ip-10-0-1-8", "node label"},
		{"pod/vllm-0", "pod label"},
		{"", "fleet-wide"},
		{"gpu-3", "instance label"},
	}
	got := JoinHosts(in)
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%v: got %+v, want %+v", in[i], got[i], want[i])
		}
	}
}
