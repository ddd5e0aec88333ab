package main

import (
	"slices"
	"testing"
)

func TestStoreFlags(t *testing.T) {
	c, _, err := parseServeFlags([]string{
		"--store.endpoint", "q1:10901,q2:10901", "--store.endpoint", "store:10901",
		"--query.replica-label", "replica", "--query.replica-label", "prometheus_replica",
		"--query.partial-response=false", "--store.tls.ca-file", "ca.pem",
		"--store.max-source-resolution", "1h",
	})
	if err != nil {
		t.Fatal(err)
	}
	s := c.stores
	if !slices.Equal(s.endpoints, []string{"q1:10901", "q2:10901", "store:10901"}) {
		t.Errorf("endpoints %q", s.endpoints)
	}
	if !slices.Equal(s.replicaLabels, []string{"replica", "prometheus_replica"}) {
		t.Errorf("replica labels %q", s.replicaLabels)
	}
	if s.maxResolution != "1h" {
		t.Errorf("max source resolution %q", s.maxResolution)
	}
	if s.partial || s.tlsConfig.CAFile != "ca.pem" {
		t.Errorf("partial %v, CA %q", s.partial, s.tlsConfig.CAFile)
	}
	c, _, err = parseServeFlags(nil)
	if err != nil || !c.stores.partial || len(c.stores.endpoints) != 0 || c.stores.maxResolution != "0s" {
		t.Errorf("defaults: %+v %v", c.stores, err)
	}
}
