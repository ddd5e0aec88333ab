// Builds dist/module.js (AMD, as Grafana loads plugins) with Grafana's own
// packages, React and rxjs left external: Grafana provides them at run time.
// Also copies plugin.json (version and date filled in), the logo and docs.
const path = require('path');
const CopyWebpackPlugin = require('copy-webpack-plugin');
const pkg = require('./package.json');

const today = new Date().toISOString().slice(0, 10);

module.exports = (_env, argv) => ({
  mode: argv.mode || 'production',
  context: path.join(__dirname, 'src'),
  entry: { module: './module.ts' },
  devtool: 'source-map',
  target: 'web',
  output: {
    path: path.join(__dirname, 'dist'),
    filename: '[name].js',
    library: { type: 'amd' },
    publicPath: 'public/plugins/tailroot-tailroot-datasource/',
    clean: { keep: /^(gpx_|go_plugin_build_manifest)/ },
    uniqueName: 'tailroot-tailroot-datasource',
  },
  externals: [
    'react',
    'react-dom',
    'react/jsx-runtime',
    '@grafana/data',
    '@grafana/ui',
    '@grafana/runtime',
    '@grafana/schema',
    '@grafana/i18n',
    '@emotion/css',
    '@emotion/react',
    'rxjs',
    'rxjs/operators',
    'lodash',
  ],
  resolve: { extensions: ['.ts', '.tsx', '.js', '.mjs'] },
  module: {
    rules: [
      { test: /\.[tj]sx?$/, exclude: /node_modules/, use: { loader: 'swc-loader' } },
      { test: /\.m?js$/, resolve: { fullySpecified: false } },
    ],
  },
  performance: { hints: false },
  plugins: [
    new CopyWebpackPlugin({
      patterns: [
        {
          from: 'plugin.json',
          to: '.',
          transform: (content) =>
            content.toString().replace('%VERSION%', process.env.PLUGIN_VERSION || pkg.version).replace('%TODAY%', today),
        },
        { from: 'img', to: 'img' },
        // The catalog requires README, CHANGELOG and LICENSE in the archive.
        { from: '../README.md', to: '.' },
        { from: '../CHANGELOG.md', to: '.' },
        { from: '../LICENSE', to: '.' },
        { from: '../CONTRACT.md', to: '.' },
      ],
    }),
  ],
});
