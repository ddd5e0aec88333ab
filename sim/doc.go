// Package sim is tailroot's built-in workload simulator: it generates
// realistic LLM-inference series (vLLM metric names and bucket boundaries,
// several models and instances, diurnal load) and sends them through the same
// remote-write path that real agents use.
//
// # What comes in, what goes out
//
// In: Options (models, instances, seed, step, diurnal shape). Out: from
// Step, the value of every series at a time, as []Series (labels, metadata,
// one float or native-histogram sample each); from Encode, a snappy-compressed
// remote-write 1.0 or 2.0 body; from Run, those bodies POSTed to
// {URL}/api/v1/write with the headers Prometheus sends.
//
// # Series
//
// Each instance exposes what a vLLM v1 server exposes (vllm/v1/metrics/loggers.py)
// as Prometheus stores it after a scrape: labels model_name and engine from
// vLLM, job and instance from the scrape; counters with _total; classic
// histograms as _bucket{le}/_sum/_count with vLLM's boundaries and le values
// formatted as Prometheus 3 normalises them ("1.0", "0.001", "+Inf"). With
// Options.NativeHistograms the eight latency histograms are also sent as
// native histograms (schema 3) under the family name.
//
// Invariants, checked by the tests: counters, bucket counts, _sum and _count
// never decrease; buckets are cumulative and _count equals the +Inf bucket;
// the same Options and Step times give the same series; Step returns the same
// series in the same order every time.
//
// # Serving model
//
// Per instance and per sub-step of at most Interval, with λ the arrival rate:
//
//   - λ = MeanRPS · (1 + a·cos(2π(h − PeakHour)/24)) · exp(x − σ²/2), with
//     a = (F−1)/(F+1) for F = DiurnalFactor (so peak/trough = F and the daily
//     mean is MeanRPS), h the UTC hour, and x an AR(1) process with sd σ =
//     Noise and a 10-minute correlation time. Arrivals are Poisson(λ·dt).
//   - Prompt and output lengths are log-normal; outputs reaching max_tokens
//     finish with "length", a fraction AbortRatio with "abort", the rest with
//     "stop". Prefix-cache hits are whole 16-token blocks, PrefixHitRatio of
//     the prompt on average.
//   - Running requests b solve Little's law b = λ·(Tp + Ō·d(b)), where Tp is
//     the mean uncached prompt over the prefill rate, Ō the mean output and
//     d(b) = DecodeStep·(1 + b/BatchDoubling) the decode step time; b is
//     capped by MaxNumSeqs and by the KV cache.
//   - Queue time = backlog/μ (fluid overflow when λ exceeds the capacity μ) +
//     U(0, d(b)) (waiting for the running step) + an exponential wait whose
//     mean is the Pollaczek–Khinchine M/G/1 wait of the prefill stage,
//     ρ·E[T²]/(2E[T](1−ρ)) with ρ = λ·Tp, plus Sakasegawa's M/M/c wait for a
//     batch slot. So queue time stays near zero at low load and grows without
//     bound as utilisation approaches 1.
//   - Prefill = one step per ChunkTokens chunk + uncached tokens / prefill
//     rate. Decode = output−1 inter-token gaps at d(b); a fraction of them
//     (the share of steps that carry another request's prefill chunk) is
//     longer by that chunk's compute time, which is what makes ITL tails grow
//     with load. TTFT = frontend + queue + prefill; e2e = TTFT + decode;
//     inference = prefill + decode; the ITL histogram's _sum equals the
//     decode histogram's _sum.
//
// A request is recorded in the sub-step it arrives in, as if it finished
// there; the series are as a scrape every Interval would see them.
//
// # Request records
//
// With Options.Records every simulated request is also kept as a Record
// (records.go): its labels, its arrival (the requests of a sub-step spread
// evenly over it) and the very frontend, queue, prefill and decode times
// and token counts it observed into the histograms. Keeping them draws no
// random number, so the series are the same with and without. Run hands
// each batch's records to Options.RecordSink once the batch's series are
// acknowledged and its newest step reported to Options.Sent; a
// caller that persists it and sets Options.Resume on the next start makes
// Run send only the steps after it (tailroot serve --simulate keeps it in
// <data-dir>/simulator.cursor).
//
// # Covariates, faults and incidents
//
// With Options.Covariates each instance also reports what tailroot-agent
// and dcgm-exporter would for its node: run-queue delay, page faults, GIL
// waits, block IO and CUDA call latency, SM clock, GPU utilisation, power,
// memory clock and framebuffer use. Their levels wander with slow AR(1)
// noise and feed back into the serving model (host.go gives the formulas):
// run-queue delay and GIL waits lengthen the frontend, page faults stall
// decode, the SM clock sets prefill and decode speed, slow block IO makes
// weight loads block the engine. Options.Faults injects incidents into one
// instance each (faults.go): CPU contention, a page-fault storm, a noisy IO
// neighbour, GPU throttling, a load surge, long-context requests. With
// neither option the series and the random draws are exactly those
// described above.
//
// Scenario (scenario.go) generates a reproducible window with one fault and
// its GroundTruth (the root-cause series, the stages it lengthens), derives
// the per-step Signals a root-cause ranking reads (each with the PromQL that
// computes it from the stored series), and pushes the incident by remote
// write (in time order across series, so a TSDB head accepts all of it;
// Push counts what was accepted) or writes it as OpenMetrics text.
// Scenario.Labels and InstancePrefix keep a scenario apart from live data.
package sim
