// Test setup: the base in .config/ (jsdom gaps, jest-dom matchers).
require('./.config/jest-setup');
