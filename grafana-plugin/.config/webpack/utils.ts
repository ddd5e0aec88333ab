import fs from 'fs';
import path from 'path';

import { SOURCE_DIR } from './constants';

export const ROOT_DIR = path.resolve(__dirname, '..', '..');

export function getPackageJson(): { version: string } {
  return JSON.parse(fs.readFileSync(path.join(ROOT_DIR, 'package.json'), 'utf8'));
}

export function getPluginJson(): { id: string; type: string } {
  return JSON.parse(fs.readFileSync(path.join(ROOT_DIR, SOURCE_DIR, 'plugin.json'), 'utf8'));
}
