// The plugin's jest configuration: create-plugin's base in .config/.
module.exports = {
  ...require('./.config/jest.config'),
};
