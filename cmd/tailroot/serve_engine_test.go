package main

import (
	"strings"
	"testing"

	"github.com/tailroot/tailroot/query"
)

func TestQueryEngineFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, query.EngineFast},
		{[]string{"--query.engine=upstream"}, query.EngineUpstream},
		{[]string{"--query.engine", "fast"}, query.EngineFast},
	} {
		c, _, err := parseServeFlags(tc.args)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if c.query.Engine != tc.want {
			t.Errorf("%v: engine %q, want %q", tc.args, c.query.Engine, tc.want)
		}
	}
	if _, _, err := parseServeFlags([]string{"--query.engine=vm"}); err == nil || !strings.Contains(err.Error(), `"vm" is not an engine`) {
		t.Errorf("--query.engine=vm: err = %v, want a refusal naming the value", err)
	}
}
