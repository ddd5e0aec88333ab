// Package sim is tailroot's built-in workload simulator: it generates
// realistic LLM-inference series (vLLM metric names and bucket boundaries,
// several models and instances, diurnal load) and sends them through the same
// remote-write path that real agents use.
package sim
