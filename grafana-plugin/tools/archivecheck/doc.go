// Package archivecheck checks a built Grafana plugin archive (the zip that
// `make plugin` writes) against the rules of Grafana's plugin validator
// that can be checked without the network: the catalog refuses an archive
// that breaks them, and the validator only runs at submission time, so the
// build checks them first.
//
// In: the zip and the plugin's source folder (its Go module root). Out:
// every rule the archive breaks, each naming the rule and what was wrong,
// or none. The rules:
//
//   - one top folder in the archive, named after plugin.json's id;
//   - plugin.json: an id of the form org-name-type whose last part is the
//     plugin type, a filled-in version and date, backend with an
//     executable name;
//   - one backend per platform, gpx_<exe>_<os>_<arch>[.exe], executable,
//     and really built for that platform (its ELF, Mach-O or PE header
//     names the OS format and the CPU);
//   - module.js with its source map (module.js.map, referenced from
//     module.js and listing its sources);
//   - README.md, CHANGELOG.md with an entry for the version, LICENSE, and
//     the logos plugin.json names;
//   - no relative link or image in the README (the catalog renders it away
//     from the repository, where relative links break);
//   - go_plugin_build_manifest listing the sha256 of every Go source file
//     of the module (node_modules excepted, as the SDK's generator does),
//     each one matching the file in the source folder.
//
// The hashing here is written independently of the SDK's generator that
// writes the manifest, so a disagreement between the two shows up.
package archivecheck
