package rca

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func TestNewGraphRejects(t *testing.T) {
	nodes := []Node{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	for _, c := range []struct {
		name  string
		nodes []Node
		edges []Edge
		want  string
	}{
		{"cycle", nodes, []Edge{{"a", "b"}, {"b", "c"}, {"c", "a"}}, "cycle"},
		{"self loop", nodes, []Edge{{"a", "a"}}, "cycle"},
		{"unknown node", nodes, []Edge{{"a", "z"}}, `unknown node "z"`},
		{"duplicate", []Node{{Name: "a"}, {Name: "a"}}, nil, `duplicate node "a"`},
		{"unnamed", []Node{{Name: ""}}, nil, "no name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewGraph(c.nodes, c.edges)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestGraphLevelsAndAncestors(t *testing.T) {
	// a → b → d, a → c → d, c → e: levels a 0, b 1, c 1, d 2, e 2.
	g, err := NewGraph([]Node{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}, {Name: "e"}},
		[]Edge{{"a", "b"}, {"b", "d"}, {"a", "c"}, {"c", "d"}, {"c", "e"}})
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range map[string]int{"a": 0, "b": 1, "c": 1, "d": 2, "e": 2} {
		if got := g.Level(n); got != want {
			t.Errorf("Level(%s) = %d, want %d", n, got, want)
		}
	}
	anc := g.Ancestors("d")
	if len(anc) != 3 || !anc["a"] || !anc["b"] || !anc["c"] {
		t.Errorf("Ancestors(d) = %v, want a, b, c", anc)
	}
	if len(g.Ancestors("a")) != 0 {
		t.Errorf("Ancestors(a) = %v, want none", g.Ancestors("a"))
	}
}

// TestServingGraphMatchesDoc checks the adjacency table in doc.go against
// servingEdges, so the documentation cannot drift from the code.
func TestServingGraphMatchesDoc(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	g := ServingGraph()
	lines := strings.Split(string(src), "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "//\tnode ") })
	if start < 0 {
		t.Fatal("no graph table in doc.go")
	}
	rows := 0
	for _, l := range lines[start+1:] {
		if !strings.HasPrefix(l, "//\t") {
			break
		}
		f := strings.Fields(strings.TrimPrefix(l, "//\t"))
		node, fam := f[0], f[1]
		var doc []string
		for _, c := range f[2:] {
			if c != "—" {
				doc = append(doc, strings.TrimSuffix(c, ","))
			}
		}
		nd, ok := g.Node(node)
		if !ok {
			t.Errorf("doc.go lists node %q, not in the graph", node)
			continue
		}
		if nd.Family != fam {
			t.Errorf("node %s: doc family %s, graph %s", node, fam, nd.Family)
		}
		code := slices.Clone(g.Children(node))
		slices.Sort(code)
		slices.Sort(doc)
		if !slices.Equal(code, doc) {
			t.Errorf("node %s: doc says it influences %v, graph %v", node, doc, code)
		}
		rows++
	}
	if rows != len(g.Nodes) {
		t.Errorf("doc.go lists %d nodes, graph has %d", rows, len(g.Nodes))
	}
}

func TestNodeFor(t *testing.T) {
	for _, c := range []struct {
		metric string
		lbls   map[string]string
		want   string
	}{
		{"tailroot_runqueue_delay_seconds_bucket", nil, "runqueue"},
		{"tailroot_runqueue_delay_seconds_sum", nil, "runqueue"},
		{"tailroot_page_faults_total", nil, "page_faults"},
		{"tailroot_gil_wait_seconds_count", nil, "gil"},
		{"tailroot_cuda_call_seconds", nil, "cuda"},
		{"tailroot_block_io_latency_seconds_bucket", nil, "block_io"},
		{"DCGM_FI_DEV_SM_CLOCK", nil, "gpu_clock"},
		{"DCGM_FI_PROF_SM_ACTIVE", nil, "gpu_util"},
		{"DCGM_FI_DEV_GPU_UTIL", nil, "gpu_util"},
		{"DCGM_FI_DEV_POWER_USAGE", nil, "gpu_power"},
		{"vllm:iteration_tokens_total_bucket", nil, "batch"},
		{"vllm:num_requests_waiting", nil, "queue"},
		{"vllm:inter_token_latency_seconds_sum", nil, "decode"},
		{"vllm:request_success_total", nil, "load"},
		{"vllm:e2e_request_latency_seconds", nil, "e2e"},
		// Labels override the name.
		{"anything", map[string]string{"stage": "detokenize"}, "tokenize"},
		{"vllm:e2e_request_latency_seconds", map[string]string{"node": "tokenize"}, "tokenize"},
		{"tailroot_stage_seconds_sum", map[string]string{"stage": "prefill"}, "prefill"},
		// Exporters' own families: candidates come from what is stored.
		{"node_cpu_seconds_total", nil, "runqueue"},
		{"node_vmstat_pgmajfault", nil, "page_faults"},
		{"node_pressure_memory_waiting_seconds_total", nil, "page_faults"},
		{"node_disk_io_time_seconds_total", nil, "block_io"},
		{"node_network_transmit_bytes_total", nil, "network"},
		{"DCGM_FI_DEV_XID_ERRORS", nil, "cuda"},
		{"DCGM_FI_DEV_GPU_TEMP", nil, "gpu_power"},
		{"DCGM_FI_DEV_POWER_VIOLATION", nil, "gpu_clock"},
		{"container_cpu_cfs_throttled_periods_total", nil, "runqueue"},
		{"sglang:num_queue_reqs", nil, "queue"},
		{"tgi_request_queue_duration_sum", nil, "queue"},
		{"nv_inference_queue_duration_us", nil, "queue"},
		// A Kubernetes machine name in "node" is not a graph node.
		{"DCGM_FI_DEV_SM_CLOCK", map[string]string{"node": "ip-10-0-1-7"}, "gpu_clock"},
	} {
		got, ok := NodeFor(c.metric, c.lbls)
		if !ok || got != c.want {
			t.Errorf("NodeFor(%q, %v) = %q, %v; want %q", c.metric, c.lbls, got, ok, c.want)
		}
	}
	for _, m := range []string{"backup_uploaded_bytes_total", "vllm:unknown", ""} {
		if n, ok := NodeFor(m, nil); ok {
			t.Errorf("NodeFor(%q) = %q, want unmapped", m, n)
		}
	}
	// Every node the table maps to exists.
	g := ServingGraph()
	for _, m := range metricNodes {
		if _, ok := g.Node(m.node); !ok {
			t.Errorf("metric %s maps to unknown node %s", m.pattern, m.node)
		}
	}
	for s, n := range stageNodes {
		if _, ok := g.Node(n); !ok {
			t.Errorf("stage %s maps to unknown node %s", s, n)
		}
	}
}

// TestLittlesLaw checks which input of a state counts by Little's law:
// the arrival rate under the running batch (load → batch), not a request
// length (tokens → batch), not the rate under another node (load →
// queue), not a node that is no parent of the batch.
func TestLittlesLaw(t *testing.T) {
	g := ServingGraph()
	for _, tc := range []struct {
		input, state string
		want         bool
	}{{"load", "batch", true}, {"tokens", "batch", false}, {"load", "queue", false}, {"load", "kv_cache", false}, {"page_faults", "batch", false}} {
		if got := littlesLaw(g, tc.input, tc.state); got != tc.want {
			t.Errorf("littlesLaw(%s, %s) = %v, want %v", tc.input, tc.state, got, tc.want)
		}
	}
}
