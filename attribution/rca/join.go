package rca

import (
	"net"
	"strings"
)

// Join says how a candidate was tied to a machine: the exporters of one
// host carry different instance labels (gpu-1:8000 for vLLM, gpu-1:9400
// for dcgm-exporter, gpu-1:9100 for node-exporter), so graph edges link
// candidates by host, not by equal labels.
type Join struct {
	// Host is the machine's key ("" when the candidate names none: a
	// fleet-wide series, linked to every host).
	Host string
	// How names the rule that found Host, e.g. `Hostname label`,
	// `instance gpu-1:9400 without port`, `GPU UUID GPU-… (host from
	// DCGM_FI_DEV_SM_CLOCK)`, `fleet-wide`.
	How string
}

// hostLabels are read, in order, before instance: the labels exporters
// and Kubernetes service discovery use to name the machine.
var hostLabels = []string{"kubernetes_node", "node", "host", "hostname", "Hostname"}

// uuidLabels name a GPU: dcgm-exporter's UUID, tailroot-agent's gpu_uuid.
var uuidLabels = []string{"UUID", "gpu_uuid"}

// JoinHosts finds each candidate's host: the first of the labels
// kubernetes_node, node, host, hostname, Hostname that is set; else the
// instance label without its port (and without a scheme or path, and
// with localhost and loopback addresses left as they are); else pod; else,
// for a series carrying only a GPU UUID (UUID, gpu_uuid), the host of
// another candidate with the same UUID and a host. A candidate with none
// of these is fleet-wide. The result is parallel to lbls.
func JoinHosts(lbls []map[string]string) []Join {
	out := make([]Join, len(lbls))
	byUUID := map[string]string{}
	for i, l := range lbls {
		out[i] = hostOf(l)
		if out[i].Host == "" {
			continue
		}
		for _, u := range uuidLabels {
			if v := l[u]; v != "" && byUUID[v] == "" {
				byUUID[v] = out[i].Host
			}
		}
	}
	for i, l := range lbls {
		if out[i].Host != "" {
			continue
		}
		for _, u := range uuidLabels {
			if h := byUUID[l[u]]; l[u] != "" && h != "" {
				out[i] = Join{Host: h, How: "GPU " + u + " " + l[u]}
				break
			}
		}
		if out[i].Host == "" {
			out[i].How = "fleet-wide"
		}
	}
	return out
}

func hostOf(l map[string]string) Join {
	for _, n := range hostLabels {
		if v := l[n]; v != "" && !(n == NodeLabel && servingNode(v)) {
			return Join{Host: strings.ToLower(v), How: n + " label"}
		}
	}
	if v := l["instance"]; v != "" {
		h := v
		if i := strings.Index(h, "://"); i >= 0 {
			h = h[i+3:]
		}
		if i := strings.IndexByte(h, '/'); i >= 0 {
			h = h[:i]
		}
		if host, _, err := net.SplitHostPort(h); err == nil {
			h = host
		}
		h = strings.ToLower(strings.Trim(h, "[]"))
		if h != v {
			return Join{Host: h, How: "instance " + v + " without port"}
		}
		return Join{Host: h, How: "instance label"}
	}
	if v := l["pod"]; v != "" {
		return Join{Host: "pod/" + v, How: "pod label"}
	}
	return Join{}
}
