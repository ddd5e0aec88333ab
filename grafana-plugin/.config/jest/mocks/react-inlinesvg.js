// @grafana/ui's icons load SVGs over the network through react-inlinesvg;
// in unit tests an empty <svg> stands in for them.
const React = require('react');

module.exports = { __esModule: true, default: (props) => React.createElement('svg', { 'data-icon': props.src }) };
