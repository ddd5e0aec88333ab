// The plugin's lint configuration: create-plugin's base in .config/.
import baseConfig from './.config/eslint.config.mjs';

export default [...baseConfig];
