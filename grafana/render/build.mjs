// Bundles src/main.tsx (+ index.html) into dist/ with esbuild.
import { build } from 'esbuild';
import { copyFileSync, cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, 'dist');
rmSync(dist, { recursive: true, force: true });
mkdirSync(dist, { recursive: true });

// Grafana's .mjs files default-import some CommonJS packages that set
// __esModule. esbuild follows Node's rule for .mjs importers (default = the
// whole module.exports object), so the component would get {default: Class}
// instead of the class (React error #130). Route those imports through a shim
// that unwraps the default export. (vite applies the same interop itself.)
const CJS_DEFAULT_SHIM = ['react-custom-scrollbars-2'];
const cjsDefaultShim = {
  name: 'cjs-default-shim',
  setup(b) {
    const filter = new RegExp(`^(${CJS_DEFAULT_SHIM.map((n) => n.replace(/[-/]/g, '\\$&')).join('|')})$`);
    b.onResolve({ filter }, (args) => {
      if (args.namespace === 'cjs-default-shim') return undefined; // the real package
      return { path: args.path, namespace: 'cjs-default-shim' };
    });
    b.onLoad({ filter: /.*/, namespace: 'cjs-default-shim' }, (args) => ({
      resolveDir: here,
      loader: 'js',
      contents: [
        `import * as m from ${JSON.stringify(args.path)};`,
        `const d = m.default && m.default.__esModule && 'default' in m.default ? m.default.default : (m.default ?? m);`,
        `export default d;`,
        `export * from ${JSON.stringify(args.path)};`,
      ].join('\n'),
    }));
  },
};

await build({
  plugins: [cjsDefaultShim],
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
// <Icon> fetches SVGs from public/build/img/icons/ (Grafana's static path);
// @grafana/ui ships them, so serve the same files from dist/.
const uiDist = dirname(createRequire(import.meta.url).resolve('@grafana/ui/package.json'));
const icons = join(dist, 'public/build/img/icons');
cpSync(join(uiDist, 'dist/public/img/icons'), icons, { recursive: true });
// The flame graph header's "Collapse all groups" button asks for
// angle-double-up, which @grafana/ui 13.0.1 does not ship: derive it from
// angle-double-down, flipped vertically.
const up = join(icons, 'unicons/angle-double-up.svg');
if (!existsSync(up)) {
  const down = readFileSync(join(icons, 'unicons/angle-double-down.svg'), 'utf8');
  writeFileSync(up, down.replace(/<path /, '<path transform="matrix(1 0 0 -1 0 24)" '));
}
console.error('build: dist/ ready');
