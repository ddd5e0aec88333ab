package main

import "github.com/prometheus/prometheus/config"

// unsupportedSections lists whole sections of the configuration file that
// this build of tailroot does not act on.
func unsupportedSections(cfg *config.Config) []string {
	var keys []string
	if len(cfg.RemoteWriteConfigs) > 0 {
		keys = append(keys, "remote_write")
	}
	return keys
}
