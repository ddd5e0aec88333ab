// Builds dist/module.js (AMD, as Grafana loads plugins) with Grafana's own
// packages, React and rxjs left external: Grafana provides them at run time.
// Also copies plugin.json (version and date filled in), the logo and the
// documents the catalog requires. Laid out as @grafana/create-plugin's.
import CopyWebpackPlugin from 'copy-webpack-plugin';
import path from 'path';
import type { Configuration } from 'webpack';

import { DIST_DIR, SOURCE_DIR } from './constants';
import { getPackageJson, getPluginJson, ROOT_DIR } from './utils';

type Env = { production?: boolean; development?: boolean };

const config = (env: Env = {}): Configuration => {
  const pluginJson = getPluginJson();
  const today = new Date().toISOString().slice(0, 10);
  const version = process.env.PLUGIN_VERSION || getPackageJson().version;
  return {
    mode: env.production ? 'production' : 'development',
    context: path.join(ROOT_DIR, SOURCE_DIR),
    entry: { module: './module.ts' },
    // The catalog wants the source map in the archive next to module.js.
    devtool: 'source-map',
    target: 'web',
    output: {
      path: path.join(ROOT_DIR, DIST_DIR),
      filename: '[name].js',
      library: { type: 'amd' },
      publicPath: `public/plugins/${pluginJson.id}/`,
      // The Go backends and their manifest are built into dist/ as well.
      clean: { keep: /^(gpx_|go_plugin_build_manifest)/ },
      uniqueName: pluginJson.id,
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
        {
          test: /\.[tj]sx?$/,
          exclude: /node_modules/,
          use: {
            loader: 'swc-loader',
            options: {
              jsc: {
                parser: { syntax: 'typescript', tsx: true },
                target: 'es2020',
                transform: { react: { runtime: 'automatic' } },
              },
            },
          },
        },
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
            transform: (content: Buffer) => content.toString().replace('%VERSION%', version).replace('%TODAY%', today),
          },
          { from: 'img', to: 'img' },
          // The catalog's screenshot is the one the browser test takes (docs/images).
          { from: '../../docs/images/plugin-query-editor.png', to: 'img/screenshot-query-editor.png' },
          // The catalog requires README, CHANGELOG and LICENSE in the archive.
          { from: '../README.md', to: '.' },
          { from: '../CHANGELOG.md', to: '.' },
          { from: '../LICENSE', to: '.' },
          { from: '../CONTRACT.md', to: '.' },
        ],
      }),
    ],
  };
};

export default config;
