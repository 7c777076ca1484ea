// Bundles src/main.tsx (+ index.html) into dist/ with esbuild.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, 'dist');
rmSync(dist, { recursive: true, force: true });
mkdirSync(dist, { recursive: true });

await build({
  absWorkingDir: here,
  entryPoints: ['src/main.tsx'],
  outfile: join(dist, 'main.js'),
  bundle: true,
  format: 'iife',
  platform: 'browser',
  target: 'chrome120',
  minify: true,
  legalComments: 'none',
  logLevel: 'warning',
  jsx: 'automatic',
  define: {
    'process.env.NODE_ENV': '"production"',
    global: 'window',
  },
  loader: {
    '.ttf': 'file',
    '.woff': 'file',
    '.woff2': 'file',
    '.eot': 'file',
    '.svg': 'file',
    '.png': 'file',
  },
});
copyFileSync(join(here, 'index.html'), join(dist, 'index.html'));
console.error('build: dist/ ready');
