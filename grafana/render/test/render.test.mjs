// Self-test of the renderer harness: the sample frames pass, the broken ones
// fail for the expected reason. Needs scripts/setup-grafana.sh to have run.
//   node --test test/        (or: npm test)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = join(dirname(fileURLToPath(import.meta.url)), '..');
const TD = join(HERE, 'testdata');

function render(files, extra = []) {
  const out = mkdtempSync(join(tmpdir(), 'flamehouse-render-'));
  const r = spawnSync(process.execPath, [join(HERE, 'render.mjs'), '--out', out, '--timeout', '20000', ...extra, ...files], {
    encoding: 'utf8',
    timeout: 180000,
  });
  const results = r.stdout
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
  return { status: r.status, stderr: r.stderr, results, out };
}

test('sample frames render and pass every check', () => {
  const { status, stderr, results, out } = render([join(TD, 'normal.json'), join(TD, 'diff.json')]);
  assert.equal(status, 0, stderr + JSON.stringify(results));
  const [normal, diff] = results;
  for (const r of results) {
    assert.equal(r.ok, true);
    assert.deepEqual(r.pageErrors, []);
    assert.equal(r.canvasDrawn, true);
    assert.equal(r.rootSpansFullWidth, true);
    assert.ok(existsSync(r.png), r.png);
  }
  assert.equal(normal.rootValue, 1000);
  assert.equal(normal.tableTotal, 1000);
  assert.equal(normal.totalExact, true);
  assert.equal(diff.diff, true);
  assert.equal(diff.tableTotal, 1000);
  assert.equal(diff.tableTotalRight, 1200);
  rmSync(out, { recursive: true, force: true });
});

test('broken frames fail with the expected reasons', () => {
  const files = ['broken-missing-self.json', 'broken-two-roots.json', 'broken-breadth-first.json'].map((f) => join(TD, f));
  const { status, results, out } = render(files);
  assert.equal(status, 1);
  const [missing, twoRoots, bfs] = results;
  assert.equal(missing.ok, false);
  assert.ok(missing.pageErrors.some((e) => e.includes('Data is missing fields: self')), JSON.stringify(missing.pageErrors));
  assert.equal(missing.canvasDrawn, false);
  assert.equal(twoRoots.ok, false);
  assert.ok(twoRoots.frameIssues.some((e) => e.includes('rows at level 0')));
  assert.equal(bfs.ok, false);
  // The panel itself raises nothing for a breadth-first frame: only the
  // frame check catches it.
  assert.deepEqual(bfs.pageErrors, []);
  assert.deepEqual(bfs.failures, ['frame']);
  rmSync(out, { recursive: true, force: true });
});
