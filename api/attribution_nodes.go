package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/tailroot/tailroot/internal/httpapi"
	"github.com/tailroot/tailroot/query/tailfn"
)

// The attribution endpoints over peers. With AttributionOptions.Cluster
// set, /breakdown, /report and /ab answer from the records of this server
// and its peers through the distributed tail protocol
// (docs/distributed-tails.md), as the PromQL record functions do: the same
// numbers as one server holding every record, a clear error naming a peer
// that does not answer, or with partial_response=true the other nodes'
// answer and a warning. Every answer says in "nodes" which nodes it covers.

// nodesData is the "nodes" object of an attribution answer.
type nodesData struct {
	// Answered is the number of nodes the answer covers, Of the number
	// the server reads (itself and its peers).
	Answered int `json:"answered"`
	Of       int `json:"of"`
	// Partial is true when a peer that did not answer was left out;
	// LeftOut names each such peer with its error.
	Partial bool     `json:"partial"`
	LeftOut []string `json:"left_out"`
}

func nodesJSON(n tailfn.Nodes) nodesData {
	out := nodesData{Answered: n.Answered, Of: n.Of, Partial: n.Partial(), LeftOut: n.LeftOut}
	if out.LeftOut == nil {
		out.LeftOut = []string{}
	}
	return out
}

// localNodes is what an answer from this server's records alone covers.
func (a *Attribution) localNodes() tailfn.Nodes {
	n := tailfn.Nodes{Answered: 1, Of: 1}
	if a.opts.Cluster != nil {
		n.Of = len(a.opts.Cluster.Shards())
	}
	return n
}

// nodesOf reads the parameters local (true: this server's records only)
// and partial_response (true: leave out a peer that does not answer,
// false: fail; empty: the server's --records.partial-response) and returns
// the cluster to answer over, nil for the local records, and the context
// that carries the partial-response choice.
func (a *Attribution) nodesOf(r *http.Request) (*tailfn.Cluster, context.Context, error) {
	ctx := r.Context()
	local, err := parseBool("local", r.FormValue("local"))
	if err != nil {
		return nil, nil, err
	}
	if s := r.FormValue("partial_response"); s != "" {
		partial, err := parseBool("partial_response", s)
		if err != nil {
			return nil, nil, err
		}
		ctx = tailfn.WithPartialResponse(ctx, partial)
	}
	if local || a.opts.Cluster == nil {
		return nil, ctx, nil
	}
	return a.opts.Cluster, ctx, nil
}

// parseBool reads the value s of the boolean parameter name; empty is false.
func parseBool(name, s string) (bool, error) {
	if s == "" {
		return false, nil
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		return false, httpapi.BadData("parameter %s=%q: want true or false", name, s)
	}
	return v, nil
}

// peerFailure is the answer to a peer that did not answer: 502
// "unavailable", the message naming the peer and partial_response; nil
// for any other error.
func peerFailure(err error) error {
	var pe *tailfn.PeerError
	if err != nil && errors.As(err, &pe) {
		return &httpapi.Error{Code: http.StatusBadGateway, Type: httpapi.ErrUnavailable, Err: err}
	}
	return nil
}
