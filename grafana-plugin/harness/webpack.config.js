// Builds the browser-test harness: the plugin's own sources plus React and
// Grafana's packages bundled in (there is no Grafana to provide them).
const path = require('path');
const CopyWebpackPlugin = require('copy-webpack-plugin');

module.exports = (_env, argv) => ({
  mode: argv.mode || 'development',
  context: __dirname,
  entry: { harness: './index.tsx' },
  devtool: false,
  target: 'web',
  output: { path: path.join(__dirname, 'dist'), filename: '[name].js', clean: true },
  resolve: { extensions: ['.ts', '.tsx', '.js', '.mjs'] },
  module: {
    rules: [
      { test: /\.[tj]sx?$/, exclude: /node_modules/, use: { loader: 'swc-loader' } },
      { test: /\.m?js$/, resolve: { fullySpecified: false } },
      { test: /\.css$/, type: 'asset/source' },
      { test: /\.(svg|png|woff2?)$/, type: 'asset/inline' },
    ],
  },
  performance: { hints: false },
  cache: { type: 'filesystem', cacheDirectory: path.join(__dirname, '..', 'node_modules', '.cache', 'harness-webpack') },
  plugins: [new CopyWebpackPlugin({ patterns: [{ from: 'index.html', to: '.' }] })],
});
