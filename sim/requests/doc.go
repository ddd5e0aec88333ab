// Package requests is tailroot's request-level workload simulator: it
// replays real arrival traces (Azure LLM inference 2023, Mooncake; see
// traces/README.md) through a model of a vLLM server and produces one
// record per request, with every lifecycle timestamp and every output
// token's emission time.
//
// In: Options (trace, speed-up, instances, serving parameters, seed). Out:
// from Simulate, []Request; from AppendNDJSON, a line of POST
// /api/v1/requests; from AppendSpans, vLLM-shaped llm_request OTLP spans;
// from Sender and Run, those pushed to a tailroot server.
//
// The serving model (Simulate's doc comment has the formulas) is
// continuous batching with chunked prefill and a prefix cache, so queueing
// appears when arrival bursts exceed capacity, long prompts delay the
// decode steps they share, and the latency tail is made of queue and
// prefill the way it is on a real server.
//
// Invariants, checked by the tests: the timestamps of every request are
// ordered (arrival ≤ queued ≤ scheduled ≤ first token ≤ … ≤ last token ≤
// finished); a request emits exactly OutputTokens tokens; the measured
// stages never exceed the end-to-end time; the same Options give the same
// requests.
package requests
