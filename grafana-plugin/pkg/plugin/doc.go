// Package plugin is the backend of the tailroot Grafana datasource
// (plugin id tailroot-tailroot-datasource; plugin.json keeps the earlier id
// tailroot-datasource as an alias). It lives in the plugin's own Go module,
// github.com/tailroot/tailroot/grafana-plugin, so that the server's module
// does not depend on the plugin SDK; its tests build the server from the
// parent folder and talk to it over HTTP only.
//
// # What comes in
//
// Grafana's QueryData, CheckHealth and CallResource calls, with the
// datasource's settings (URL, basic auth, custom headers, timeout). Each
// query's JSON is a Query: queryType promql (PromQL or MetricsQL, instant or
// range) or one of the attribution kinds breakdown, rootcause, causal and ab.
// Template variables arrive already interpolated by the frontend.
//
// # What goes out
//
// Data frames as Grafana's panels expect them: one time-series frame per
// series (timeseries-multi), numeric or table frames for instant queries,
// heatmap-cells frames for native histograms and the token-position ×
// latency heatmap, a wide frame per breakdown (stacked bars), tables for
// heat tables, root-cause rankings, causal effects and A/B comparisons, and
// nodes/edges frames for the Node Graph panel. The attribution endpoints'
// request and response shapes are fixed in ../../CONTRACT.md.
//
// # What holds
//
// Errors are per RefID and never fail the whole request: bad query JSON and
// 4xx answers of the server are downstream errors (the user's or the
// server's), failures of the plugin's own conversion are plugin errors. A 404
// from an attribution endpoint reads "this tailroot server does not support
// <kind> yet". Frames are deterministic for a given server answer: series
// keep the server's order and labels are sorted by name.
package plugin
