package rca

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Node is a node of the serving graph: a quantity that several metrics may
// measure.
type Node struct {
	Name string `json:"id"`
	// Family groups nodes for Benjamini–Hochberg: "workload", "host",
	// "gpu", "engine" or "stage" ("other" for unmapped candidates).
	Family string `json:"family"`
	// Title is a short human name ("run-queue delay").
	Title       string `json:"title"`
	Description string `json:"description"`
}

// Edge says that From influences To.
type Edge struct {
	From string `json:"source"`
	To   string `json:"target"`
}

// Graph is a directed acyclic graph of nodes. Build one with NewGraph; the
// zero value is an empty graph.
type Graph struct {
	Nodes []Node
	Edges []Edge

	index   map[string]int
	parents map[string][]string
	child   map[string][]string
	topo    map[string]int
}

// NewGraph checks that every edge joins known nodes and that the graph has no
// cycle, and indexes it.
func NewGraph(nodes []Node, edges []Edge) (*Graph, error) {
	g := &Graph{
		Nodes: slices.Clone(nodes), Edges: slices.Clone(edges),
		index: map[string]int{}, parents: map[string][]string{}, child: map[string][]string{}, topo: map[string]int{},
	}
	for i, n := range nodes {
		if n.Name == "" {
			return nil, fmt.Errorf("graph: node %d has no name", i)
		}
		if _, dup := g.index[n.Name]; dup {
			return nil, fmt.Errorf("graph: duplicate node %q", n.Name)
		}
		g.index[n.Name] = i
	}
	for _, e := range edges {
		for _, n := range []string{e.From, e.To} {
			if _, ok := g.index[n]; !ok {
				return nil, fmt.Errorf("graph: edge %s → %s names unknown node %q", e.From, e.To, n)
			}
		}
		g.parents[e.To] = append(g.parents[e.To], e.From)
		g.child[e.From] = append(g.child[e.From], e.To)
	}
	// Kahn's algorithm; the level of a node is one more than its deepest
	// parent's.
	indeg := map[string]int{}
	for _, e := range edges {
		indeg[e.To]++
	}
	var queue []string
	for _, n := range nodes {
		if indeg[n.Name] == 0 {
			queue = append(queue, n.Name)
		}
	}
	seen := 0
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		seen++
		for _, c := range g.child[n] {
			g.topo[c] = max(g.topo[c], g.topo[n]+1)
			if indeg[c]--; indeg[c] == 0 {
				queue = append(queue, c)
			}
		}
	}
	if seen != len(nodes) {
		return nil, fmt.Errorf("graph: edges form a cycle")
	}
	return g, nil
}

// Node returns the node called name.
func (g *Graph) Node(name string) (Node, bool) {
	i, ok := g.index[name]
	if !ok {
		return Node{}, false
	}
	return g.Nodes[i], true
}

// Parents returns the nodes with an edge into name.
func (g *Graph) Parents(name string) []string { return g.parents[name] }

// Children returns the nodes name has an edge into.
func (g *Graph) Children(name string) []string { return g.child[name] }

// Level is the length of the longest path from a source node to name: 0 for
// nodes without parents.
func (g *Graph) Level(name string) int { return g.topo[name] }

// Ancestors returns every node with a path into name.
func (g *Graph) Ancestors(name string) map[string]bool {
	out := map[string]bool{}
	var walk func(string)
	walk = func(n string) {
		for _, p := range g.parents[n] {
			if !out[p] {
				out[p] = true
				walk(p)
			}
		}
	}
	walk(name)
	return out
}

// Descendants returns every node name has a path to.
func (g *Graph) Descendants(name string) map[string]bool {
	out := map[string]bool{}
	var walk func(string)
	walk = func(n string) {
		for _, c := range g.child[n] {
			if !out[c] {
				out[c] = true
				walk(c)
			}
		}
	}
	walk(name)
	return out
}

// FirstStages returns the stage-family nodes reachable from name without
// passing through another stage: the stages name acts on directly.
func (g *Graph) FirstStages(name string) map[string]bool {
	out, seen := map[string]bool{}, map[string]bool{}
	var walk func(string)
	walk = func(n string) {
		for _, c := range g.child[n] {
			if seen[c] {
				continue
			}
			seen[c] = true
			if g.Node0(c).Family == FamilyStage {
				out[c] = true
				continue
			}
			walk(c)
		}
	}
	walk(name)
	return out
}

// StageOf is the canonical stage a candidate on node acts on: node itself
// if it is a tailroot stage (queue, tokenize, prefill, decode), else among
// the nearest such stages downstream (children first, then
// grandchildren, …) the one score rates highest, else "". score gives
// the score of a node's candidate in the candidate's group (−Inf when
// none).
func (g *Graph) StageOf(node string, score func(node string) float64) string {
	if canonicalStages[node] {
		return node
	}
	if node == "" {
		return ""
	}
	seen := map[string]bool{node: true}
	level := []string{node}
	for len(level) > 0 {
		var next []string
		stage, best := "", math.Inf(-1)
		for _, n := range level {
			for _, c := range g.Children(n) {
				if seen[c] {
					continue
				}
				seen[c] = true
				next = append(next, c)
				if !canonicalStages[c] {
					continue
				}
				if s := score(c); stage == "" || s > best {
					stage, best = c, s
				}
			}
		}
		if stage != "" {
			return stage
		}
		level = next
	}
	return ""
}

// canonicalStages are the graph nodes that are tailroot stages.
var canonicalStages = map[string]bool{"queue": true, "tokenize": true, "prefill": true, "decode": true}

// Node0 is Node without the ok result: the zero Node when name is unknown.
func (g *Graph) Node0(name string) Node {
	n, _ := g.Node(name)
	return n
}

// Families of nodes.
const (
	FamilyWorkload = "workload"
	FamilyHost     = "host"
	FamilyGPU      = "gpu"
	FamilyEngine   = "engine"
	FamilyStage    = "stage"
	FamilyOther    = "other"
)

// servingNodes and servingEdges are the known LLM-serving graph; see doc.go
// for the picture and the reasons behind each edge.
var servingNodes = []Node{
	{"load", FamilyWorkload, "request load", "request arrival and completion rate"},
	{"tokens", FamilyWorkload, "tokens per request", "prompt and output length per request"},
	{"token_rate", FamilyWorkload, "token throughput", "tokens per second: load × length"},
	{"runqueue", FamilyHost, "run-queue delay", "CPU contention: scheduler run-queue delay, CPU pressure and use, CFS throttling"},
	{"page_faults", FamilyHost, "page faults", "page faults of the server processes"},
	{"gil", FamilyHost, "GIL wait", "Python GIL wait in the API server"},
	{"block_io", FamilyHost, "block IO latency", "block IO latency of the disk holding the weights"},
	{"network", FamilyHost, "network", "the host's network traffic and errors"},
	{"gpu_clock", FamilyGPU, "SM clock", "SM clock (throttling)"},
	{"gpu_util", FamilyGPU, "GPU utilisation", "GPU utilisation and activity"},
	{"gpu_power", FamilyGPU, "GPU power", "GPU power and temperature"},
	{"cuda", FamilyGPU, "CUDA waits", "CUDA API call and synchronisation waits"},
	{"batch", FamilyEngine, "batch size", "running requests and tokens per engine step"},
	{"kv_cache", FamilyEngine, "KV cache", "KV-cache and GPU memory use, preemptions"},
	{"queue", FamilyStage, "queue", "time waiting for a batch slot, requests waiting"},
	{"tokenize", FamilyStage, "tokenize (frontend)", "API server time: tokenisation, scheduling, detokenisation (the frontend residual)"},
	{"prefill", FamilyStage, "prefill", "prefill time"},
	{"decode", FamilyStage, "decode", "decode time and inter-token latency"},
	{"ttft", FamilyStage, "time to first token", "time to first token"},
	{"inference", FamilyStage, "inference", "prefill plus decode time"},
	{"e2e", FamilyStage, "end to end", "end-to-end request latency"},
}

var servingEdges = []Edge{
	{"load", "token_rate"},
	{"tokens", "token_rate"},
	{"load", "batch"},
	{"tokens", "batch"},
	{"token_rate", "batch"},
	// A slower GPU makes every engine step longer, so requests accumulate
	// and the running batch grows (Little's law): a throttle moves the
	// batch without its load parents moving.
	{"gpu_clock", "batch"},
	{"load", "gil"},
	{"runqueue", "gil"},
	{"load", "queue"},
	{"tokens", "queue"},
	{"token_rate", "queue"},
	{"block_io", "queue"},
	{"batch", "queue"},
	{"kv_cache", "queue"},
	{"prefill", "queue"},
	{"batch", "kv_cache"},
	{"tokens", "kv_cache"},
	{"batch", "gpu_util"},
	{"gpu_clock", "gpu_util"},
	{"gpu_util", "gpu_power"},
	{"gpu_clock", "gpu_power"},
	{"gpu_clock", "cuda"},
	{"batch", "cuda"},
	{"runqueue", "tokenize"},
	{"page_faults", "tokenize"},
	{"network", "tokenize"},
	{"gil", "tokenize"},
	{"tokens", "tokenize"},
	{"tokens", "prefill"},
	{"batch", "prefill"},
	{"gpu_clock", "prefill"},
	{"gpu_util", "prefill"},
	{"cuda", "prefill"},
	{"tokens", "decode"},
	{"batch", "decode"},
	{"kv_cache", "decode"},
	{"gpu_clock", "decode"},
	{"gpu_util", "decode"},
	{"cuda", "decode"},
	{"page_faults", "decode"},
	{"queue", "ttft"},
	{"tokenize", "ttft"},
	{"prefill", "ttft"},
	{"prefill", "inference"},
	{"decode", "inference"},
	{"ttft", "e2e"},
	{"decode", "e2e"},
}

// ServingGraph returns the known LLM-serving graph (doc.go).
func ServingGraph() *Graph {
	g, err := NewGraph(servingNodes, servingEdges)
	if err != nil {
		panic("BUG: serving graph: " + err.Error())
	}
	return g
}

// metricNodes maps metric names (and, with a trailing "*", name prefixes;
// histogram suffixes _bucket, _sum and _count are stripped first) to nodes.
// The table in doc.go is this list.
var metricNodes = []struct{ pattern, node string }{
	{"vllm:request_success_total", "load"},
	{"http_requests_total", "load"},
	{"vllm:request_prompt_tokens", "tokens"},
	{"vllm:request_generation_tokens", "tokens"},
	{"vllm:request_params_max_tokens", "tokens"},
	{"vllm:request_params_n", "tokens"},
	{"vllm:prompt_tokens_total", "token_rate"},
	{"vllm:generation_tokens_total", "token_rate"},
	{"vllm:prefix_cache_queries_total", "token_rate"},
	{"vllm:prefix_cache_hits_total", "token_rate"},
	{"vllm:gpu_prefix_cache_queries_total", "token_rate"},
	{"vllm:gpu_prefix_cache_hits_total", "token_rate"},
	{"vllm:num_requests_running", "batch"},
	{"vllm:iteration_tokens_total", "batch"},
	{"vllm:kv_cache_usage_perc", "kv_cache"},
	{"vllm:gpu_cache_usage_perc", "kv_cache"},
	{"vllm:num_preemptions_total", "kv_cache"},
	{"vllm:num_requests_waiting", "queue"},
	{"vllm:request_queue_time_seconds", "queue"},
	{"vllm:request_prefill_time_seconds", "prefill"},
	{"vllm:request_decode_time_seconds", "decode"},
	{"vllm:inter_token_latency_seconds", "decode"},
	{"vllm:time_per_output_token_seconds", "decode"},
	{"vllm:request_time_per_output_token_seconds", "decode"},
	{"vllm:time_to_first_token_seconds", "ttft"},
	{"vllm:request_inference_time_seconds", "inference"},
	{"vllm:e2e_request_latency_seconds", "e2e"},
	{"tailroot_runqueue_delay_seconds", "runqueue"},
	{"tailroot_page_faults_total", "page_faults"},
	{"tailroot_gil_wait_seconds", "gil"},
	{"tailroot_block_io_latency_seconds", "block_io"},
	{"tailroot_cuda_call_seconds", "cuda"},
	{"DCGM_FI_DEV_SM_CLOCK", "gpu_clock"},
	{"DCGM_FI_DEV_MEM_CLOCK", "gpu_clock"},
	{"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gpu_clock"},
	{"DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gpu_clock"},
	{"DCGM_FI_DEV_GPU_UTIL", "gpu_util"},
	{"DCGM_FI_DEV_MEM_COPY_UTIL", "gpu_util"},
	{"DCGM_FI_PROF_*", "gpu_util"},
	{"DCGM_FI_DEV_POWER_USAGE", "gpu_power"},
	{"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "gpu_power"},
	{"DCGM_FI_DEV_GPU_TEMP", "gpu_power"},
	{"DCGM_FI_DEV_MEMORY_TEMP", "gpu_power"},
	{"DCGM_FI_DEV_FB_USED", "kv_cache"},
	{"DCGM_FI_DEV_FB_FREE", "kv_cache"},
	{"DCGM_FI_DEV_XID_ERRORS", "cuda"},
	{"DCGM_FI_DEV_*VIOLATION*", "gpu_clock"},
	{"DCGM_FI_DEV_*CLOCK*", "gpu_clock"},
	{"DCGM_FI_DEV_*TEMP*", "gpu_power"},
	{"DCGM_FI_DEV_*POWER*", "gpu_power"},
	{"DCGM_FI_DEV_*UTIL*", "gpu_util"},

	// node-exporter.
	{"node_vmstat_pgmajfault", "page_faults"},
	{"node_vmstat_pgfault", "page_faults"},
	{"node_vmstat_pswp*", "page_faults"},
	{"node_pressure_memory_*", "page_faults"},
	{"node_memory_*", "page_faults"},
	{"node_pressure_cpu_*", "runqueue"},
	{"node_cpu_seconds_total", "runqueue"},
	{"node_load*", "runqueue"},
	{"node_procs_running", "runqueue"},
	{"node_schedstat_*", "runqueue"},
	{"node_context_switches_total", "runqueue"},
	{"node_pressure_io_*", "block_io"},
	{"node_disk_*", "block_io"},
	{"node_network_*", "network"},
	{"node_netstat_*", "network"},

	// cAdvisor / kubelet.
	{"container_cpu_cfs_throttled_*", "runqueue"},
	{"container_cpu_usage_seconds_total", "runqueue"},
	{"container_pressure_cpu_*", "runqueue"},
	{"container_memory_*", "page_faults"},
	{"container_fs_*", "block_io"},
	{"container_network_*", "network"},

	// SGLang.
	{"sglang:num_running_reqs", "batch"},
	{"sglang:num_queue_reqs", "queue"},
	{"sglang:queue_time_seconds", "queue"},
	{"sglang:token_usage", "kv_cache"},
	{"sglang:cache_hit_rate", "token_rate"},
	{"sglang:gen_throughput", "token_rate"},
	{"sglang:prompt_tokens_total", "token_rate"},
	{"sglang:generation_tokens_total", "token_rate"},
	{"sglang:num_requests_total", "load"},
	{"sglang:time_to_first_token_seconds", "ttft"},
	{"sglang:inter_token_latency_seconds", "decode"},
	{"sglang:time_per_output_token_seconds", "decode"},
	{"sglang:e2e_request_latency_seconds", "e2e"},

	// Text Generation Inference.
	{"tgi_request_count", "load"},
	{"tgi_request_success", "load"},
	{"tgi_request_input_length", "tokens"},
	{"tgi_request_generated_tokens", "tokens"},
	{"tgi_batch_current_size", "batch"},
	{"tgi_batch_current_max_tokens", "batch"},
	{"tgi_queue_size", "queue"},
	{"tgi_request_queue_duration", "queue"},
	{"tgi_batch_forward_duration", "prefill"},
	{"tgi_request_mean_time_per_token_duration", "decode"},
	{"tgi_request_inference_duration", "inference"},
	{"tgi_request_duration", "e2e"},

	// Triton Inference Server.
	{"nv_inference_request_success", "load"},
	{"nv_inference_count", "load"},
	{"nv_inference_pending_request_count", "queue"},
	{"nv_inference_queue_duration_us", "queue"},
	{"nv_inference_compute_input_duration_us", "prefill"},
	{"nv_inference_compute_infer_duration_us", "inference"},
	{"nv_inference_request_duration_us", "e2e"},
	{"nv_gpu_utilization", "gpu_util"},
	{"nv_gpu_power_usage", "gpu_power"},
	{"nv_gpu_memory_used_bytes", "kv_cache"},
}

// stageNodes maps values of a "stage" label (tailroot's canonical stages) to
// nodes.
var stageNodes = map[string]string{
	"queue": "queue", "tokenize": "tokenize", "detokenize": "tokenize",
	"network": "tokenize", "other": "tokenize", "prefill": "prefill", "decode": "decode",
}

// NodeLabel is the label that, on a candidate series, names its node
// directly and overrides the mapping by metric name.
const NodeLabel = "node"

// NodeFor maps a candidate to its serving-graph node: the "node" label if
// set, else the "stage" label (queue, tokenize, detokenize, network, other,
// prefill, decode), else the metric name per the table in doc.go. ok is
// false for a candidate no rule maps.
func NodeFor(metric string, lbls map[string]string) (node string, ok bool) {
	if n := lbls[NodeLabel]; n != "" && servingNode(n) {
		return n, true
	}
	if n, ok := stageNodes[lbls["stage"]]; ok {
		return n, true
	}
	base := metric
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(metric, suf); ok {
			base = b
			break
		}
	}
	for _, m := range metricNodes {
		if match(m.pattern, base) || match(m.pattern, metric) {
			return m.node, true
		}
	}
	return "", false
}

// graphNode is the candidate's node of the serving graph: the one it was
// given, else the one its name and labels map to ("" for none).
func (c Candidate) graphNode() string {
	if c.Node != "" {
		return c.Node
	}
	node, _ := NodeFor(c.Metric, c.Labels)
	return node
}

// match reports whether name matches pattern, where each "*" stands for
// any run of characters.
func match(pattern, name string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return name == pattern
	}
	if !strings.HasPrefix(name, parts[0]) {
		return false
	}
	rest := name[len(parts[0]):]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return strings.HasSuffix(rest, parts[len(parts)-1])
}

// servingNode reports whether name is a node of the serving graph: a
// "node" label naming anything else (Kubernetes puts the machine's name
// there) does not choose the node.
func servingNode(name string) bool {
	for _, n := range servingNodes {
		if n.Name == name {
			return true
		}
	}
	return false
}
