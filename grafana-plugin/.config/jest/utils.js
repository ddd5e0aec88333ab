// Which node_modules jest leaves untranspiled. Several of @grafana/ui's
// dependencies ship ES modules only (d3-*, ol, @react-hookz, …), so
// node_modules are transpiled too, except these CommonJS packages
// (transpiling them is slow and can break them) and .cjs files.
const commonJSModules = ['react', 'react-dom', 'scheduler', 'lodash', 'moment', 'rxjs', 'monaco-editor', '@babel', 'jsdom'];

const nodeModulesToIgnore = (modules = commonJSModules) => ['\\.cjs$', `node_modules/(${modules.join('|')})/`];

module.exports = { commonJSModules, nodeModulesToIgnore };
