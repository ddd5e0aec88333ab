package apptest

import "github.com/prometheus/prometheus/model/labels"

func labelsOf(kv ...string) labels.Labels { return labels.FromStrings(kv...) }
