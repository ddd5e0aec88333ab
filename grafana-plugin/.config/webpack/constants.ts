// Folders of the create-plugin layout, relative to the plugin root.
export const SOURCE_DIR = 'src';
export const DIST_DIR = 'dist';
