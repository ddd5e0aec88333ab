package plugin

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/backend"
	"github.com/grafana/grafana-plugin-sdk-go/backend/grpcplugin"
	"github.com/grafana/grafana-plugin-sdk-go/genproto/pluginv2"
	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
)

// TestGRPCPluginProcess builds the backend binary and runs it the way
// Grafana does: as a child process that answers the go-plugin handshake
// (magic cookie grafana_plugin_type=datasource, protocol version 2) and
// serves the pluginv2 gRPC services. The test then calls CheckHealth,
// QueryData and CallResource through the generated gRPC clients, against a
// real tailroot.
func TestGRPCPluginProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the plugin binary")
	}
	srv := fixedServer(t)
	bin := filepath.Join(t.TempDir(), "gpx_tailroot_linux_amd64")
	build := exec.Command("go", "build", "-o", bin, "./pkg")
	build.Dir = pluginRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build plugin: %v\n%s", err, out)
	}

	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "GF_PLUGIN_VERSION=0.0.0-test")
	client := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig: goplugin.HandshakeConfig{
			ProtocolVersion:  grpcplugin.ProtocolVersion,
			MagicCookieKey:   grpcplugin.MagicCookieKey,
			MagicCookieValue: grpcplugin.MagicCookieValue,
		},
		VersionedPlugins: map[int]goplugin.PluginSet{grpcplugin.ProtocolVersion: {
			"diagnostics": &grpcplugin.DiagnosticsGRPCPlugin{},
			"resource":    &grpcplugin.ResourceGRPCPlugin{},
			"data":        &grpcplugin.DataGRPCPlugin{},
		}},
		Cmd:              cmd,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		Logger:           hclog.NewNullLogger(),
		StartTimeout:     30 * time.Second,
	})
	t.Cleanup(client.Kill)
	rpc, err := client.Client()
	if err != nil {
		t.Fatalf("go-plugin handshake: %v", err)
	}
	dispense := func(name string) any {
		raw, err := rpc.Dispense(name)
		if err != nil {
			t.Fatalf("dispense %s: %v", name, err)
		}
		return raw
	}
	diag := dispense("diagnostics").(grpcplugin.DiagnosticsClient)
	dataClient := dispense("data").(grpcplugin.DataClient)
	res := dispense("resource").(grpcplugin.ResourceClient)

	pctx := backend.PluginContext{
		PluginID: ID, PluginVersion: "0.0.0-test",
		DataSourceInstanceSettings: &backend.DataSourceInstanceSettings{
			ID: 1, UID: "tailroot", Name: "tailroot", Type: ID, URL: srv.URL,
			JSONData: []byte(`{}`), Updated: time.Unix(1, 0),
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	toProto := backend.ToProto()

	t.Run("CheckHealth", func(t *testing.T) {
		resp, err := diag.CheckHealth(ctx, &pluginv2.CheckHealthRequest{PluginContext: toProto.PluginContext(pctx)})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status != pluginv2.CheckHealthResponse_OK || !strings.HasPrefix(resp.Message, "tailroot ") {
			t.Errorf("health %v %q", resp.Status, resp.Message)
		}
	})

	t.Run("QueryData", func(t *testing.T) {
		early := backend.TimeRange{From: T0, To: T0.Add(2 * time.Minute)}
		req := &backend.QueryDataRequest{PluginContext: pctx, Queries: []backend.DataQuery{
			dataQuery("A", map[string]any{"expr": "vllm:num_requests_running", "legendFormat": "{{instance}}"}, early),
			dataQuery("B", map[string]any{"queryType": "breakdown"}, early),
		}}
		pr, err := dataClient.QueryData(ctx, toProto.QueryDataRequest(req))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := backend.FromProto().QueryDataResponse(pr)
		if err != nil {
			t.Fatalf("decode Arrow frames: %v", err)
		}
		a := resp.Responses["A"]
		if a.Error != nil || len(a.Frames) != 2 {
			t.Fatalf("A: %v, %d frames", a.Error, len(a.Frames))
		}
		// Same answer as in-process: gpu-1 holds 2i at T0 + 15s·i.
		if got := floatsOf(t, a.Frames[1].Fields[1]); !slices.Equal(got, []float64{0, 2, 4, 6, 8, 10, 12, 14, 16}) {
			t.Errorf("gpu-1 values %v", got)
		}
		if a.Frames[1].Fields[1].Labels["instance"] != "gpu-1" {
			t.Errorf("labels %v", a.Frames[1].Fields[1].Labels)
		}
		// A per-RefID error crosses the gRPC boundary with its source: the
		// exact "not supported" message while the server lacks the
		// endpoint, and never a plugin error.
		b := resp.Responses["B"]
		if endpointMissing(t, srv.URL, attributionPath[QueryTypeBreakdown]) {
			if b.Error == nil || b.Error.Error() != "this tailroot server does not support breakdown yet" {
				t.Errorf("B: %v", b.Error)
			}
		}
		if b.Error != nil && b.ErrorSource != backend.ErrorSourceDownstream {
			t.Errorf("B: %v (source %q)", b.Error, b.ErrorSource)
		}
	})

	t.Run("CallResource", func(t *testing.T) {
		preq := toProto.CallResourceRequest(&backend.CallResourceRequest{
			PluginContext: pctx, Path: "label-values", URL: "label-values?label=instance", Method: "GET",
		})
		stream, err := res.CallResource(ctx, preq)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		if err := json.Unmarshal(msg.Body, &got); err != nil || msg.Code != 200 {
			t.Fatalf("%d %s", msg.Code, msg.Body)
		}
		if !slices.Equal(got, []string{"gpu-0", "gpu-1"}) {
			t.Errorf("instances %v", got)
		}
	})
}
