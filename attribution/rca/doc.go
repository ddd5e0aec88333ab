// Package rca ranks root-cause candidates for a latency change over the
// known LLM-serving graph.
//
// In: a target series (the latency that defines the incident) and candidate
// series on the same time grid, each with a metric name and labels. Out: a
// Result whose Ranking orders every candidate, most likely root cause
// first, with its RHT score, plain BARO score, shift, p- and q-value and
// the candidate upstream that explains it; Baseline holds plain BARO on
// the same change point. Pure functions: no I/O, inputs never modified.
//
// # Method
//
// BARO (Pham et al., FSE 2024) scores each metric by how far it moves after
// the change point in units of its own spread before it. On its own it ranks
// effects as readily as causes: a queue that grows from 60 ms to 4 s moves
// a thousand IQRs while the SM clock that caused it moves thirty. Rank
// therefore scores each candidate's residual after regressing it on its
// graph parents before the change (CIRCA's regression-based hypothesis
// testing, Li et al., KDD 2022), tests the residual for a level shift with
// Newey–West errors, controls the false discovery rate with
// Benjamini–Hochberg within each node family, and demotes candidates with
// an anomalous ancestor (descendant adjustment); an ancestor with a
// sustained move of its own counts as anomalous when a descendant is
// (an arrival rate whose running batch moved needs only its family's
// false discovery rate: Little's law). A candidate ranks as a
// root cause only if it also passes causal checks that reject decoys: it
// changes before or with the target (its split on values, or on ranks
// when that one is the earlier: a series that moves twice holds two
// splits), its fluctuations predict the target
// beyond the change itself (an incremental-prediction F-test conditional on
// the step, AIC lag, Benjamini–Hochberg), and the stages it acts on moved.
// A mild fault that shifts its root cause by less than the usual
// magnitude floor still counts when the shift is a sustained step at the
// change, significant at the Bonferroni level over all candidates.
// A target's change has a harmful direction (HarmfulDirection: a latency,
// an error rate or a queue rises, a throughput falls; Options.Direction
// overrides it): a change the other way is an improvement and answers "no
// incident", and the change point is searched among changes the harmful
// way (OnsetDirected).
// Result.Verdict says "no incident" when the target did not change (or
// improved) and "unexplained" when nothing passing the checks explains it;
// Result.VerdictReason says why in words and Result.Why in one word. A
// target change too weak to stand alone (|z| between 1.96, or 1.645 with a
// known direction, and 3) is an incident when the first root cause stepped
// clearly at that time, informs about the target (itself, or through an
// informative anomaly it explains) and corroborates it — for an aggregate
// target (the fleet's TTFT) the target's slice on the cause's host (the
// same metric on that host) may show the move at the cause's split
// instead of the aggregate, each of the two at a Bonferroni share of the
// level, when that split lies within five minutes of the change — and
// when the target's own split misses such a change, the change
// times that clear steps of candidates point at are tried. An incident is
// also a step: when neither the target nor its first root cause jumps at
// its change by more than the window's load wander makes elsewhere
// (step.go), the target wandered with its load and the answer is "no
// incident". An arrival rate is the exception both ways (loadstep.go): a
// mild surge on one host barely moves a fleet's latency but steps its
// request rate plainly, so a load-node candidate whose own split rises
// persistently (|z| ≥ 4) with a clear local jump (≥ 2.5), after which
// the target moved the harmful way (pointwise z ≥ 0.5), is an incident
// with Why "load stepped" when, ranked at that time, it is the first
// root cause; and as the first root cause of a target change clear on
// its own, its persistent rise counts as the step. See Rank for
// the formulas and Onset for the change-point methods.
//
// # The serving graph
//
// Edges read "influences". Faults enter at the top and flow down; every
// node's parents are the quantities its value depends on in a vLLM-style
// server (continuous batching, chunked prefill, a Python API server in
// front of the engine).
//
//	node         family    influences
//	load         workload  token_rate, batch, gil, queue
//	tokens       workload  token_rate, batch, kv_cache, queue, tokenize, prefill, decode
//	token_rate   workload  batch, queue
//	runqueue     host      gil, tokenize
//	page_faults  host      tokenize, decode
//	gil          host      tokenize
//	block_io     host      queue
//	network      host      tokenize
//	gpu_clock    gpu       batch, gpu_util, gpu_power, cuda, prefill, decode
//	gpu_util     gpu       gpu_power, prefill, decode
//	gpu_power    gpu       —
//	cuda         gpu       prefill, decode
//	batch        engine    kv_cache, gpu_util, cuda, queue, prefill, decode
//	kv_cache     engine    queue, decode
//	queue        stage     ttft
//	tokenize     stage     ttft
//	prefill      stage     queue, ttft, inference
//	decode       stage     inference, e2e
//	ttft         stage     e2e
//	inference    stage     —
//	e2e          stage     —
//
// This is servingEdges in graph.go (a test checks the table against it).
// Reasons for the less obvious edges: prefill → queue (the prefill service
// time is the queue's service time, Pollaczek–Khinchine); runqueue → gil (a
// GIL holder that is descheduled holds everybody up); block_io → queue
// (weight and adapter loads block the engine's step loop); page_faults →
// decode (faults in the engine process stall the decode loop) and →
// tokenize (in the API server).
//
// # Candidate → node mapping
//
// NodeFor applies, in order: a "node" label naming a node of the graph
// (any other value, such as a Kubernetes machine name, is ignored); a "stage"
// label (queue, tokenize, detokenize, network, other, prefill, decode —
// tailroot's canonical stages; detokenize, network and other map to
// tokenize, the frontend residual); then the metric name with any
// _bucket/_sum/_count suffix removed:
//
//	metric                                                   node
//	vllm:request_success_total, http_requests_total          load
//	vllm:request_prompt_tokens, vllm:request_generation_tokens,
//	  vllm:request_params_max_tokens, vllm:request_params_n  tokens
//	vllm:prompt_tokens_total, vllm:generation_tokens_total,
//	  vllm:(gpu_)prefix_cache_queries_total / _hits_total    token_rate
//	vllm:num_requests_running, vllm:iteration_tokens_total   batch
//	vllm:kv_cache_usage_perc, vllm:gpu_cache_usage_perc,
//	  vllm:num_preemptions_total, DCGM_FI_DEV_FB_USED/_FREE  kv_cache
//	vllm:num_requests_waiting, vllm:request_queue_time_seconds  queue
//	vllm:request_prefill_time_seconds                        prefill
//	vllm:request_decode_time_seconds, vllm:inter_token_latency_seconds,
//	  vllm:time_per_output_token_seconds,
//	  vllm:request_time_per_output_token_seconds             decode
//	vllm:time_to_first_token_seconds                         ttft
//	vllm:request_inference_time_seconds                      inference
//	vllm:e2e_request_latency_seconds                         e2e
//	tailroot_runqueue_delay_seconds                          runqueue
//	tailroot_page_faults_total                               page_faults
//	tailroot_gil_wait_seconds                                gil
//	tailroot_block_io_latency_seconds                        block_io
//	tailroot_cuda_call_seconds                               cuda
//	DCGM_FI_DEV_SM_CLOCK, DCGM_FI_DEV_MEM_CLOCK,
//	  DCGM_FI_DEV_CLOCK_THROTTLE_REASONS,
//	  DCGM_FI_DEV_CLOCKS_EVENT_REASONS                       gpu_clock
//	DCGM_FI_DEV_GPU_UTIL, DCGM_FI_DEV_MEM_COPY_UTIL,
//	  DCGM_FI_PROF_* (SM active, occupancy, tensor, DRAM)    gpu_util
//	DCGM_FI_DEV_POWER_USAGE, DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION,
//	  DCGM_FI_DEV_GPU_TEMP, DCGM_FI_DEV_MEMORY_TEMP          gpu_power
//
// Beyond these names, graph.go's metricNodes maps the families of
// node-exporter (node_vmstat_pgmajfault and node_pressure_memory_* →
// page_faults; node_pressure_cpu_*, node_cpu_seconds_total, node_load* →
// runqueue; node_disk_*, node_pressure_io_* → block_io; node_network_* →
// network), the remaining dcgm-exporter fields (clocks, throttle and
// violation counters → gpu_clock; temperatures and power → gpu_power; XID
// errors → cuda), cAdvisor/kubelet (container_cpu_cfs_throttled_*,
// container_cpu_usage_seconds_total → runqueue; container_memory_* →
// page_faults), SGLang (sglang:…), Text Generation Inference (tgi_…) and
// Triton (nv_inference_…, nv_gpu_…); docs/causal.md has the table.
//
// A candidate no rule maps keeps node "" and family "other": it is scored
// by plain BARO (no parents) and explains nothing.
//
// Node families, the Benjamini–Hochberg families: workload (load, tokens,
// token_rate), host (runqueue, page_faults, gil, block_io), gpu (gpu_clock,
// gpu_util, gpu_power, cuda), engine (batch, kv_cache), stage (queue,
// tokenize, prefill, decode, ttft, inference, e2e).
//
// # Groups
//
// Graph edges link candidates of the same group only: by default those of
// one host (JoinHosts: host labels, instance without port, pod, GPU UUID),
// because one machine's exporters carry different instance labels; with
// Options.GroupLabels, those with equal labels. Instance A's SM clock
// explains instance A's prefill, not B's. A candidate without any of them
// (a fleet-wide series) links to every group.
package rca
