// Unit tests: @swc/jest transpiles TypeScript; jsdom stands in for the browser.
module.exports = {
  testEnvironment: 'jsdom',
  roots: ['<rootDir>/src'],
  testMatch: ['**/*.test.ts', '**/*.test.tsx'],
  transform: { '^.+\\.(m?js|tsx?|jsx)$': ['@swc/jest', { jsc: { transform: { react: { runtime: 'automatic' } } } }] },
  // Several of @grafana/ui's dependencies ship ES modules only (d3-*, ol,
  // @react-hookz, …); transpile node_modules too, except CommonJS builds.
  transformIgnorePatterns: ['\\.cjs$', 'node_modules/(react|react-dom|scheduler|lodash|moment|rxjs|monaco-editor|@babel|jsdom)/'],
  setupFilesAfterEnv: ['<rootDir>/jest.setup.js'],
  moduleNameMapper: {
    '\\.(css|scss|sass)$': '<rootDir>/jest.style-stub.js',
    '^react-inlinesvg$': '<rootDir>/jest.inlinesvg-stub.js',
  },
};
