package depcheck

// The server's stages, the agent's side, and what sits beside them.
var (
	serverStages = []string{"api", "ingest", "tsdb", "query", "attribution", "ruler", "sim"}
	topLevel     = []string{"agent", "api", "apptest", "attribution", "bpf", "cmd", "ingest", "query", "ruler", "sim", "tsdb"}
)

// Rules are the arrows DESIGN.md's picture never draws. They read top to
// bottom as the stages do: cmd wires everything; api speaks HTTP over
// ingest, tsdb, query and attribution; attribution is pure statistics; the
// agent is a separate program that shares only internal helpers with the
// server; bpf is the agent's.
var Rules = []Rule{
	{
		From: "attribution", Only: []string{"std", "gonum.org/v1/gonum", "attribution"},
		Why: "attribution is pure statistics: the standard library and gonum only, so every formula is testable alone",
	},
	{
		From: "*", Unless: []string{"cmd"}, Never: []string{"cmd"}, Tests: true,
		Why: "cmd/ wires the program; nothing builds on it",
	},
	{
		From: "*", Unless: []string{"apptest"}, Never: []string{"apptest"},
		Why: "apptest starts the built binaries for end-to-end tests; only tests use it",
	},
	{
		From: "*", Unless: []string{"cmd", "api", "apptest"}, Never: []string{"api"}, Tests: true,
		Why: "api speaks HTTP only and sits on top: ingest, tsdb, query and attribution work without it; the programs (cmd/) and the end-to-end tests (apptest/) mount it",
	},
	{
		From: "*", Unless: []string{"cmd", "apptest", "sim"}, Never: []string{"sim"},
		Why: "the workload simulator feeds a server from outside (serve --simulate, tests); no stage depends on it",
	},
	{
		From: "*", Unless: []string{"agent", "bpf"}, Never: []string{"bpf"}, Tests: true,
		Why: "the eBPF programs are the agent's; the server never loads them",
	},
	{
		From: "agent", Never: serverStages, Tests: true,
		Why: "the agent is its own program on every node and speaks to the server over the wire only (remote write, evidence push)",
	},
	{
		From: "cmd/tailroot-agent", Never: serverStages, Tests: true,
		Why: "the agent binary carries none of the server",
	},
	{
		From: "tsdb", Never: []string{"ingest", "query"},
		Why: "storage is below ingest and query: they append to and read from it",
	},
	{
		From: "query", Never: []string{"ingest"},
		Why: "queries read storage, never the ingest path",
	},
	{
		From: "internal", Never: topLevel,
		Why: "internal/ holds helpers every stage shares; a helper that needs a stage belongs in that stage",
	},
}

// Exceptions are the edges the rules forbid that the tree has today, each
// with the reason it stays for now.
var Exceptions = []Exception{
	{
		From: "query/tailfn", To: "api", Test: true,
		Why: "the distributed-tails benchmark serves its shards through api's records/shard handler",
	},
}
