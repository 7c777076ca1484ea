#!/usr/bin/env node
// Render flame graph data frames with Grafana's own FlameGraph component in
// headless Chromium and check the drawing.
//
//   node render.mjs --out DIR [--timeout MS] [--width PX] [--table] frame1.json [frame2.json ...]
//
// For each frame it writes DIR/<name>.png and prints one JSON line:
//   {file, png, ok, failures, pageErrors, canvasDrawn, rootSpansFullWidth,
//    tableTotal, rootValue, ...}
// Exit code: 0 when every frame passes, 1 when any fails, 2 on usage/setup errors.
// See README.md for what each check means.
import { createServer } from 'node:http';
import { readFileSync, mkdirSync, existsSync, statSync } from 'node:fs';
import { basename, dirname, extname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
const DIST = join(HERE, 'dist');
const CHROMIUM = process.env.FLAMEHOUSE_CHROMIUM || '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-dev-shm-usage',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];
const ROW_PX = 22; // PIXELS_PER_LEVEL in @grafana/flamegraph (CSS px, dpr 1)

function usage(msg) {
  if (msg) console.error(`render.mjs: ${msg}`);
  console.error('usage: node render.mjs --out DIR [--timeout MS] [--width PX] [--table] frame.json [frame.json ...]');
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { out: null, timeout: 30000, width: 1200, table: false, files: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--out') opts.out = next();
    else if (a === '--timeout') opts.timeout = Number(next());
    else if (a === '--width') opts.width = Number(next());
    else if (a === '--table') opts.table = true;
    else if (a === '-h' || a === '--help') usage();
    else if (a.startsWith('--')) usage(`unknown option ${a}`);
    else opts.files.push(a);
  }
  if (!opts.out) usage('--out DIR is required');
  if (!opts.files.length) usage('no frame files given');
  if (!(opts.timeout > 0)) usage('--timeout must be a positive number of ms');
  if (!(opts.width >= 200)) usage('--width must be >= 200');
  return opts;
}

// ---- static checks on the frame itself (no browser needed) -----------------

function field(frame, name) {
  return (frame.fields || []).find((f) => f && f.name === name);
}

/** Structural problems that make the panel draw a wrong tree (fatal) and
 *  arithmetic oddities worth a look (warnings). */
function inspectFrame(frame) {
  const issues = [];
  const warnings = [];
  if (!frame || !Array.isArray(frame.fields)) {
    return { issues: ['frame has no fields array'], warnings, rootValue: null, rootValueRight: null, diff: false };
  }
  const missing = ['level', 'label', 'value', 'self'].filter((n) => !field(frame, n));
  const hasVR = !!field(frame, 'valueRight');
  const hasSR = !!field(frame, 'selfRight');
  if (hasVR !== hasSR) missing.push(hasVR ? 'selfRight' : 'valueRight');
  if (missing.length) issues.push(`missing fields: ${missing.join(', ')}`);
  const diff = hasVR && hasSR;
  const col = (n) => (field(frame, n) && Array.isArray(field(frame, n).values) ? field(frame, n).values : null);
  const level = col('level');
  const value = col('value');
  const self = col('self');
  const vr = diff ? col('valueRight') : null;
  const sr = diff ? col('selfRight') : null;
  const rootValue = value && value.length ? value[0] : null;
  const rootValueRight = vr && vr.length ? vr[0] : null;
  if (!level || !value) return { issues, warnings, rootValue, rootValueRight, diff };

  const n = level.length;
  for (const [name, c] of [['value', value], ['self', self], ['label', col('label')], ['valueRight', vr], ['selfRight', sr]]) {
    if (c && c.length !== n) issues.push(`field ${name} has ${c.length} values, level has ${n}`);
  }
  if (n === 0) {
    issues.push('frame has no rows');
    return { issues, warnings, rootValue, rootValueRight, diff };
  }
  if (level[0] !== 0) issues.push(`first row has level ${level[0]}, expected 0 (root first)`);
  const roots = level.filter((l) => l === 0).length;
  if (roots !== 1) issues.push(`${roots} rows at level 0, expected exactly 1`);
  let jumps = 0;
  for (let i = 1; i < n; i++) {
    if (!Number.isInteger(level[i]) || level[i] < 0) {
      issues.push(`row ${i}: bad level ${level[i]}`);
      break;
    }
    if (level[i] > level[i - 1] + 1 && jumps++ < 3) {
      issues.push(`row ${i}: level ${level[i]} after ${level[i - 1]} (not depth-first pre-order)`);
    }
  }
  // Per side: children whose values add up to more than their parent's value
  // are fatal (the panel draws them outside the parent; a breadth-first or
  // otherwise mis-ordered frame shows up here). value != self + children is
  // only a warning (a pruned tree leaves a remainder; some profilers' self is
  // on another scale, e.g. Grafana's own Pyroscope test data).
  const checkSums = (v, s, side) => {
    if (!v) return;
    const stack = []; // [index, childSum]
    let shownIssues = 0;
    let shownWarnings = 0;
    const close = (entry) => {
      const [i, childSum] = entry;
      if (typeof v[i] !== 'number' || v[i] < 0 || (s && (typeof s[i] !== 'number' || s[i] < 0))) {
        if (shownIssues++ < 5) issues.push(`row ${i}${side}: value/self must be non-negative numbers`);
      } else if (childSum > v[i]) {
        if (shownIssues++ < 5) issues.push(`row ${i}${side}: children add up to ${childSum} > value ${v[i]}`);
      } else if (s && s[i] + childSum !== v[i]) {
        if (shownWarnings++ < 5) warnings.push(`row ${i}${side}: value ${v[i]} != self ${s[i]} + children ${childSum}`);
      }
    };
    for (let i = 0; i < n; i++) {
      while (stack.length > level[i]) close(stack.pop());
      if (stack.length) stack[stack.length - 1][1] += v[i];
      stack.push([i, 0]);
    }
    while (stack.length) close(stack.pop());
  };
  checkSums(value, self, '');
  if (diff) checkSums(vr, sr, ' (right)');
  return { issues, warnings, rootValue, rootValueRight, diff };
}

// ---- tiny static server for dist/ on 127.0.0.1 ----------------------------

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.ttf': 'font/ttf',
  '.woff': 'font/woff',
  '.woff2': 'font/woff2',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.json': 'application/json',
};

function serveDist() {
  const server = createServer((req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    const rel = decodeURIComponent(url.pathname === '/' ? '/index.html' : url.pathname);
    const path = resolve(DIST, '.' + rel);
    if (!path.startsWith(DIST + sep) || !existsSync(path) || !statSync(path).isFile()) {
      res.writeHead(404).end('not found');
      return;
    }
    res.writeHead(200, { 'content-type': TYPES[extname(path)] || 'application/octet-stream' });
    res.end(readFileSync(path));
  });
  return new Promise((ok, ko) => {
    server.once('error', ko);
    server.listen(0, '127.0.0.1', () => ok(server));
  });
}

// ---- the in-browser checks --------------------------------------------------

/** Runs in the page: pixel statistics of the flame graph canvas. */
function canvasProbe(rowPx) {
  const canvas = document.querySelector('[data-testid="panelView"] canvas[data-testid="flameGraph"]');
  if (!canvas) return { exists: false };
  const w = canvas.width;
  const h = canvas.height;
  const out = { exists: true, width: w, height: h, cssWidth: canvas.clientWidth, wrapperWidth: 0 };
  if (canvas.parentElement) out.wrapperWidth = canvas.parentElement.clientWidth;
  if (!w || !h) return { ...out, painted: 0 };
  const ctx = canvas.getContext('2d');
  const img = ctx.getImageData(0, 0, w, h).data;
  let painted = 0;
  for (let i = 3; i < img.length; i += 4) if (img[i] > 0) painted++;
  out.painted = painted;
  out.paintedFraction = painted / (w * h);
  // Root row: sample a line 3 px below its top edge, where no label text is.
  const dpr = window.devicePixelRatio || 1;
  const y = Math.min(h - 1, Math.round(3 * dpr));
  const px = (x) => {
    const o = (y * w + x) * 4;
    return [img[o], img[o + 1], img[o + 2], img[o + 3]];
  };
  // The bar is drawn from x+0.5 to W-0.5 (BAR_BORDER_WIDTH), so the first and
  // last pixel columns are antialiased: judge columns 1..w-2.
  const ref = px(Math.floor(w / 2));
  let first = -1;
  let last = -1;
  let opaque = 0;
  let offColour = 0;
  for (let x = 0; x < w; x++) {
    const p = px(x);
    if (p[3] >= 250) {
      opaque++;
      if (first < 0) first = x;
      last = x;
      if (x > 0 && x < w - 1 && Math.abs(p[0] - ref[0]) + Math.abs(p[1] - ref[1]) + Math.abs(p[2] - ref[2]) > 6) offColour++;
    }
  }
  out.root = { y, first, last, opaque, offColour, colour: ref };
  // How many rows carry paint (should equal the number of levels).
  let rows = 0;
  for (let r = 0; r * rowPx * dpr < h; r++) {
    const yy = Math.min(h - 1, Math.round((r * rowPx + 3) * dpr));
    let any = false;
    for (let x = 0; x < w && !any; x += 1) if (img[(yy * w + x) * 4 + 3] > 0) any = true;
    if (any) rows++;
  }
  out.paintedRows = rows;
  return out;
}

/** Runs in the page: text of the tooltip (portal) and the metadata pill. */
function readTexts() {
  const pill = document.querySelector('[data-testid="panelView"] [class*="metadataPill"]');
  // The tooltip is portalled to the end of <body>; find the block holding "Samples".
  let tooltip = null;
  for (const el of document.querySelectorAll('body *')) {
    if (el.closest('#root')) continue;
    const t = el.textContent || '';
    if (/Samples/.test(t) && (!tooltip || tooltip.contains(el))) tooltip = el;
  }
  // Walk up to the whole tooltip box (name + table).
  let box = tooltip;
  while (box && box.parentElement && box.parentElement !== document.body && !/tooltipContent/.test(box.className || '')) {
    box = box.parentElement;
  }
  const cells = box ? [...box.querySelectorAll('tr')].map((tr) => [...tr.children].map((td) => td.textContent.trim())) : [];
  return {
    pill: pill ? pill.textContent.trim() : null,
    tooltip: box ? box.innerText.trim() : null,
    tooltipRows: cells,
  };
}

/** Parses "1,234", "1.23 K", "1.50 MiB" etc. Returns {value, exact}. */
function parseShown(text) {
  if (text == null) return null;
  const m = String(text).trim().match(/^(-?[\d,]*\.?\d+)\s*([A-Za-z]*)$/);
  if (!m) return null;
  const n = Number(m[1].replace(/,/g, ''));
  const suffix = m[2];
  const si = { '': 1, K: 1e3, M: 1e6, B: 1e9, Bil: 1e9, Mil: 1e6, T: 1e12, Tri: 1e12, Q: 1e15 };
  if (suffix in si) return { value: n * si[suffix], exact: suffix === '' && !/\./.test(m[1]) };
  return null;
}

async function renderOne(browser, baseUrl, file, opts) {
  const name = basename(file).replace(/\.json$/i, '');
  const png = join(opts.out, `${name}.png`);
  const result = {
    file,
    png,
    ok: false,
    failures: [],
    pageErrors: [],
    canvasDrawn: false,
    rootSpansFullWidth: false,
    tableTotal: null,
    rootValue: null,
  };
  let frame;
  try {
    frame = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    result.pageErrors.push(`cannot read frame: ${e.message}`);
    result.failures.push('input');
    return result;
  }
  const info = inspectFrame(frame);
  result.rootValue = info.rootValue;
  result.diff = info.diff;
  if (info.diff) {
    result.rootValueRight = info.rootValueRight;
    result.tableTotalRight = null;
  }
  result.frameIssues = info.issues;
  result.frameWarnings = info.warnings;

  const context = await browser.newContext({
    viewport: { width: opts.width, height: 600 },
    deviceScaleFactor: 1,
    locale: 'en-US',
    timezoneId: 'UTC',
    colorScheme: 'dark',
  });
  const page = await context.newPage();
  page.setDefaultTimeout(opts.timeout);
  page.on('pageerror', (e) => result.pageErrors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') result.pageErrors.push(`console.error: ${m.text().split('\n')[0].slice(0, 500)}`);
  });
  page.on('response', (r) => {
    if (r.status() >= 400) result.pageErrors.push(`HTTP ${r.status()}: ${r.url()}`);
  });
  page.on('requestfailed', (r) => result.pageErrors.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
  await page.addInitScript(
    ([f, o]) => {
      window.__FRAME__ = f;
      window.__OPTIONS__ = o;
    },
    [frame, { table: opts.table }],
  );

  try {
    await page.goto(`${baseUrl}/index.html`, { waitUntil: 'load' });
    await page.waitForFunction(() => window.__FLAME_STATUS__ && window.__FLAME_STATUS__ !== 'rendering');
    // The canvas is sized after a measure pass and drawn in an effect: wait
    // until it has paint (or give up quietly; the checks below then fail).
    await page
      .waitForFunction(
        () => {
          if (window.__FLAME_STATUS__ === 'error' || document.querySelector('[data-testid="renderError"]')) return true;
          const c = document.querySelector('[data-testid="panelView"] canvas[data-testid="flameGraph"]');
          if (!c || !c.width || !c.height) return false;
          const d = c.getContext('2d').getImageData(0, 0, c.width, Math.min(c.height, 30)).data;
          for (let i = 3; i < d.length; i += 4) if (d[i] > 0) return true;
          return false;
        },
        null,
        { timeout: Math.min(opts.timeout, 10000), polling: 100 },
      )
      .catch(() => {});
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));

    const probe = await page.evaluate(canvasProbe, ROW_PX);
    result.canvas = probe;
    result.canvasDrawn = Boolean(probe.exists && probe.width > 0 && probe.painted > 0);
    if (result.canvasDrawn && probe.root) {
      const w = probe.width;
      const r = probe.root;
      result.rootSpansFullWidth =
        r.first <= 1 && r.last >= w - 2 && r.opaque >= w - 2 && r.offColour === 0 &&
        // the canvas itself fills the panel width
        Math.abs(probe.cssWidth - probe.wrapperWidth) <= 1;
    }

    // (d) hover the root bar: the tooltip shows the root's totals.
    if (result.canvasDrawn) {
      const box = await page.locator('[data-testid="panelView"] canvas[data-testid="flameGraph"]').boundingBox();
      if (box) {
        await page.mouse.move(box.x + box.width / 2, box.y + ROW_PX / 2);
        await page.waitForFunction(() => /Samples/.test(document.body.innerText), null, { timeout: 3000 }).catch(() => {});
        const texts = await page.evaluate(readTexts);
        result.tooltip = texts.tooltip;
        result.metadata = texts.pill;
        if (texts.tooltip) {
          if (info.diff) {
            // Rows: ["% of total", base%, comp%, diff], ["Value", ...], ["Samples", base, comp, diff]
            const samples = texts.tooltipRows.find((r) => r[0] === 'Samples');
            const pct = texts.tooltipRows.find((r) => r[0] === '% of total');
            const l = samples && parseShown(samples[1]);
            const rr = samples && parseShown(samples[2]);
            result.tableTotal = l ? l.value : null;
            result.tableTotalRight = rr ? rr.value : null;
            result.totalExact = Boolean(l && l.exact && rr && rr.exact);
            result.rootPercent = pct ? [pct[1], pct[2]] : null;
          } else {
            const m = texts.tooltip.match(/Samples:\s*([\d,.]+)/);
            const p = texts.tooltip.match(/Total:.*\(([\d.]+)%\)/);
            result.tableTotal = m ? Number(m[1].replace(/,/g, '')) : null;
            result.totalExact = true;
            result.rootPercent = p ? p[1] + '%' : null;
          }
        }
        await page.mouse.move(0, 0);
      }
    }
    if (opts.table) {
      // Informational: the root's row in the top table (values formatted with
      // the unit, so not exact). Rows are virtualised and sorted by Self, so
      // sort by Total (descending) when the root row is not in view.
      result.topTableRoot = null;
      const lf = field(frame, 'label');
      const enumText = lf?.config?.type?.enum?.text;
      const rootLabel = enumText ? enumText[lf.values[0]] : (lf?.values || [])[0];
      const rows = () =>
        page.evaluate(() =>
          [...document.querySelectorAll('[data-testid="fullView"] [data-testid="topTable"] [role="row"]')].map((r) =>
            [...r.querySelectorAll('[role="cell"]')].map((c) => c.textContent.trim()),
          ),
        );
      await page.waitForSelector('[data-testid="fullView"] [data-testid="topTable"] [role="cell"]', { timeout: 5000 }).catch(() => {});
      for (let clicks = 0; clicks <= 2 && rootLabel != null; clicks++) {
        const row = (await rows()).find((r) => r[1] === String(rootLabel));
        if (row) {
          result.topTableRoot = row.slice(1);
          break;
        }
        const sortBtn = page.locator('[data-testid="fullView"] [data-testid="topTable"] button[aria-label^="Sort by column Total"]');
        if (!(await sortBtn.count())) break;
        await sortBtn.first().click({ force: true, timeout: 3000 }).catch(() => {});
        await page.waitForTimeout(200);
      }
      await page.waitForTimeout(100);
    }
    mkdirSync(opts.out, { recursive: true });
    await page.screenshot({ path: png, fullPage: true });
    const status = await page.evaluate(() => ({ status: window.__FLAME_STATUS__, errors: window.__FLAME_ERRORS__ || [] }));
    for (const e of status.errors) {
      if (!result.pageErrors.some((p) => p.includes(e))) result.pageErrors.push(`render: ${e}`);
    }
  } catch (e) {
    result.pageErrors.push(`harness: ${e.message.split('\n')[0]}`);
  } finally {
    await context.close().catch(() => {});
  }

  // Verdict.
  const f = result.failures;
  if (result.frameIssues.length) f.push('frame');
  if (result.pageErrors.length) f.push('pageErrors');
  if (!result.canvasDrawn) f.push('canvasDrawn');
  if (!result.rootSpansFullWidth) f.push('rootSpansFullWidth');
  if (result.tableTotal === null) f.push('tableTotal');
  else {
    const near = (shown, want, exact) =>
      want != null && (exact ? shown === want : Math.abs(shown - want) <= Math.max(1, Math.abs(want) * 0.006));
    result.totalMatches =
      near(result.tableTotal, result.rootValue, result.totalExact) &&
      (!info.diff || near(result.tableTotalRight, result.rootValueRight, result.totalExact));
    if (!result.totalMatches) f.push('totalMatches');
  }
  result.ok = f.length === 0;
  return result;
}

function withTimeout(promise, ms, what) {
  let t;
  return Promise.race([
    promise,
    new Promise((_, ko) => {
      t = setTimeout(() => ko(new Error(`${what}: timed out after ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(t));
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  if (!existsSync(join(DIST, 'index.html')) || !existsSync(join(DIST, 'main.js'))) {
    usage(`${DIST} is not built: run scripts/setup-grafana.sh`);
  }
  if (!existsSync(CHROMIUM)) usage(`${CHROMIUM} not found: run scripts/setup-grafana.sh`);
  let chromium;
  try {
    ({ chromium } = await import('playwright-core'));
  } catch (e) {
    usage(`cannot load playwright-core (${e.message.split('\n')[0]}): run scripts/setup-grafana.sh`);
  }
  mkdirSync(opts.out, { recursive: true });

  const server = await serveDist();
  const baseUrl = `http://127.0.0.1:${server.address().port}`;
  let browser;
  let failed = 0;
  try {
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_ARGS,
      timeout: 60000,
    });
    for (const file of opts.files) {
      let result;
      try {
        // Per-frame budget: the page timeout plus room for hover/screenshot.
        result = await withTimeout(renderOne(browser, baseUrl, file, opts), opts.timeout + 15000, file);
      } catch (e) {
        result = { file, ok: false, failures: ['timeout'], pageErrors: [e.message], canvasDrawn: false, rootSpansFullWidth: false, tableTotal: null, rootValue: null };
      }
      if (!result.ok) failed++;
      process.stdout.write(JSON.stringify(result) + '\n');
    }
  } finally {
    if (browser) await browser.close().catch(() => {});
    server.close();
  }
  process.exitCode = failed ? 1 : 0;
}

main().catch((e) => {
  console.error(`render.mjs: ${e.stack || e.message}`);
  process.exit(2);
});
