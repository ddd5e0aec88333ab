package ingest

import (
	"fmt"
	"math"

	"github.com/prometheus/prometheus/prompb"
	"google.golang.org/protobuf/encoding/protowire"
)

// v1Request is a remote write 1.0 request (prometheus.WriteRequest)
// decoded without copying label strings: names and values are views into
// the decoded body, valid only while that buffer is. Histograms, exemplars
// and metadata — rare next to float samples — are decoded with the
// generated code.
//
// Why: gogo's generated Unmarshal allocates two strings per label, and a
// series the server already knows needs none of them. Decoding to views
// halves the handler's time on 1.0 bodies (BenchmarkRemoteWrite).
type v1Request struct {
	series   []v1Series
	pairs    [][2][]byte
	samples  []prompb.Sample
	hists    []prompb.Histogram
	exs      []prompb.Exemplar
	metadata []prompb.MetricMetadata
}

type span struct{ from, to int }

type v1Series struct {
	pairs, samples, hists, exs span
}

func (r *v1Request) reset() {
	r.series = r.series[:0]
	r.pairs = r.pairs[:0]
	r.samples = r.samples[:0]
	clear(r.hists)
	r.hists = r.hists[:0]
	clear(r.exs)
	r.exs = r.exs[:0]
	clear(r.metadata)
	r.metadata = r.metadata[:0]
}

// decode fills r from a serialized prometheus.WriteRequest. It validates the
// whole body before returning, so a malformed request is rejected before
// anything is appended.
func (r *v1Request) decode(b []byte) error {
	r.reset()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("write request: %w", protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("timeseries %d: %w", len(r.series), protowire.ParseError(n))
			}
			if err := r.decodeSeries(v); err != nil {
				return fmt.Errorf("timeseries %d: %w", len(r.series), err)
			}
			b = b[n:]
		case num == 3 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("metadata %d: %w", len(r.metadata), protowire.ParseError(n))
			}
			r.metadata = append(r.metadata, prompb.MetricMetadata{})
			if err := r.metadata[len(r.metadata)-1].Unmarshal(v); err != nil {
				return fmt.Errorf("metadata %d: %w", len(r.metadata)-1, err)
			}
			b = b[n:]
		case num == 1 || num == 3:
			return fmt.Errorf("write request field %d: wrong wire type %d", num, typ)
		default:
			n := skipField(typ, b)
			if n < 0 {
				return fmt.Errorf("write request field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
		}
	}
	return nil
}

func (r *v1Request) decodeSeries(b []byte) error {
	s := v1Series{
		pairs:   span{len(r.pairs), len(r.pairs)},
		samples: span{len(r.samples), len(r.samples)},
		hists:   span{len(r.hists), len(r.hists)},
		exs:     span{len(r.exs), len(r.exs)},
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if num >= 1 && num <= 4 && typ != protowire.BytesType {
			return fmt.Errorf("field %d: wrong wire type %d", num, typ)
		}
		var v []byte
		if num >= 1 && num <= 4 {
			if v, n = protowire.ConsumeBytes(b); n < 0 {
				return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
			}
		} else if n = skipField(typ, b); n < 0 {
			return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		switch num {
		case 1:
			name, value, err := decodeLabel(v)
			if err != nil {
				return fmt.Errorf("label %d: %w", s.pairs.to-s.pairs.from, err)
			}
			r.pairs = append(r.pairs, [2][]byte{name, value})
			s.pairs.to++
		case 2:
			smp, err := decodeSample(v)
			if err != nil {
				return fmt.Errorf("sample %d: %w", s.samples.to-s.samples.from, err)
			}
			r.samples = append(r.samples, smp)
			s.samples.to++
		case 3:
			r.exs = append(r.exs, prompb.Exemplar{})
			if err := r.exs[len(r.exs)-1].Unmarshal(v); err != nil {
				return fmt.Errorf("exemplar %d: %w", s.exs.to-s.exs.from, err)
			}
			s.exs.to++
		case 4:
			r.hists = append(r.hists, prompb.Histogram{})
			if err := r.hists[len(r.hists)-1].Unmarshal(v); err != nil {
				return fmt.Errorf("histogram %d: %w", s.hists.to-s.hists.from, err)
			}
			s.hists.to++
		}
	}
	r.series = append(r.series, s)
	return nil
}

func decodeLabel(b []byte) (name, value []byte, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, nil, protowire.ParseError(n)
		}
		b = b[n:]
		if (num == 1 || num == 2) && typ != protowire.BytesType {
			return nil, nil, fmt.Errorf("field %d: wrong wire type %d", num, typ)
		}
		switch num {
		case 1, 2:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, nil, protowire.ParseError(n)
			}
			if num == 1 {
				name = v
			} else {
				value = v
			}
			b = b[n:]
		default:
			n := skipField(typ, b)
			if n < 0 {
				return nil, nil, protowire.ParseError(n)
			}
			b = b[n:]
		}
	}
	return name, value, nil
}

func decodeSample(b []byte) (prompb.Sample, error) {
	var s prompb.Sample
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return s, protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.Fixed64Type:
			v, n := protowire.ConsumeFixed64(b)
			if n < 0 {
				return s, protowire.ParseError(n)
			}
			s.Value = math.Float64frombits(v)
			b = b[n:]
		case num == 2 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return s, protowire.ParseError(n)
			}
			s.Timestamp = int64(v)
			b = b[n:]
		case num == 1 || num == 2:
			return s, fmt.Errorf("field %d: wrong wire type %d", num, typ)
		default:
			n := skipField(typ, b)
			if n < 0 {
				return s, protowire.ParseError(n)
			}
			b = b[n:]
		}
	}
	return s, nil
}

// skipField skips an unknown field's value the way gogo's generated code
// does, so both decoders accept the same bodies: groups are skipped by
// depth, without matching the field number of their end marker.
func skipField(typ protowire.Type, b []byte) int {
	depth := 0
	total := 0
	for {
		var n int
		switch typ {
		case protowire.VarintType:
			_, n = protowire.ConsumeVarint(b)
		case protowire.Fixed64Type:
			_, n = protowire.ConsumeFixed64(b)
		case protowire.Fixed32Type:
			_, n = protowire.ConsumeFixed32(b)
		case protowire.BytesType:
			_, n = protowire.ConsumeBytes(b)
		case protowire.StartGroupType:
			depth++
		case protowire.EndGroupType:
			if depth == 0 {
				return -1
			}
			depth--
		default:
			return -1
		}
		if n < 0 {
			return n
		}
		b = b[n:]
		total += n
		if depth == 0 {
			return total
		}
		// Nested tags are read as gogo reads them: any field number.
		tag, m := protowire.ConsumeVarint(b)
		if m < 0 {
			return m
		}
		b = b[m:]
		total += m
		typ = protowire.Type(tag & 7)
	}
}
