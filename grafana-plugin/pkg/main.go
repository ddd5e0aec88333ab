// Command gpx_tailroot is the backend of the tailroot Grafana datasource.
// Grafana starts it as a plugin process (hashicorp/go-plugin over gRPC); run
// by hand with GF_PLUGIN_GRPC_STANDALONE_TAILROOT_DATASOURCE=true it serves
// in standalone (debug) mode instead.
package main

import (
	"os"

	"github.com/grafana/grafana-plugin-sdk-go/backend/datasource"
	"github.com/grafana/grafana-plugin-sdk-go/backend/log"

	"github.com/tailroot/tailroot/grafana-plugin/pkg/plugin"
)

func main() {
	if err := datasource.Manage(plugin.ID, plugin.NewDatasource, datasource.ManageOpts{}); err != nil {
		log.DefaultLogger.Error("serve plugin", "error", err.Error())
		os.Exit(1)
	}
}
