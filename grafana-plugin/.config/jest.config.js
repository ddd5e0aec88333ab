// Base jest configuration, as @grafana/create-plugin lays it out: @swc/jest
// transpiles TypeScript, jsdom stands in for the browser. Extend it in the
// plugin's root jest.config.js.
const path = require('path');

const { nodeModulesToIgnore } = require('./jest/utils');

module.exports = {
  rootDir: path.resolve(__dirname, '..'),
  testEnvironment: 'jsdom',
  roots: ['<rootDir>/src'],
  testMatch: ['<rootDir>/src/**/*.{spec,test,jest}.{js,jsx,ts,tsx}'],
  transform: {
    '^.+\\.(t|j)sx?$': ['@swc/jest', { jsc: { parser: { syntax: 'typescript', tsx: true }, transform: { react: { runtime: 'automatic' } } } }],
    '^.+\\.mjs$': ['@swc/jest'],
  },
  transformIgnorePatterns: nodeModulesToIgnore(),
  setupFilesAfterEnv: ['<rootDir>/jest-setup.js'],
  moduleNameMapper: {
    '\\.(css|scss|sass)$': '<rootDir>/.config/jest/mocks/style.js',
    '^react-inlinesvg$': '<rootDir>/.config/jest/mocks/react-inlinesvg.js',
  },
};
