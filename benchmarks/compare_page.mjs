#!/usr/bin/env node
// @ts-check
/**
 * The browser side of benchmarks/compare_page.py: headless Chromium on the compare page of a
 * bench stack, logged in through the form (frontend/e2e/browser.mjs).
 *
 *   BARREL_URL=http://127.0.0.1:8000 BARREL_USER=bench BARREL_PASSWORD=... \
 *   BENCH_PATH='/compare?runs=1,2&keys=a,b' BENCH_CHARTS=2 BENCH_REPEATS=5 \
 *   BENCH_STEP_KEY=trainer/global_step BENCH_LIVE=1 node benchmarks/compare_page.mjs
 *
 * One untimed load, then BENCH_REPEATS loads of BENCH_PATH, each in a new tab of the logged-in
 * context: the time from navigation start to the first animation frame at which BENCH_CHARTS
 * charts have their canvas and none shows "Loading…", the page's resource timing of its reads,
 * and the JS heap (CDP) before and after a forced GC. Then, with BENCH_LIVE=1, a new tab is
 * drawn and "LIVE_START" printed; frames, long tasks and added canvases are recorded until a
 * line "LIVE_END <step>" comes on stdin, then the final-values table is read (for up to 10 s,
 * until every run shows <step> for BENCH_STEP_KEY).
 *
 * With BENCH_PROFILE=1, one more load, and the live window, run under the CDP sampling profiler;
 * their self and total times per function and per source file (through the bundle's source
 * map in frontend/dist/assets) are among the results.
 *
 * Results go to stdout as lines "BENCH <json>"; anything else printed is a log line.
 */
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

import { login } from "../frontend/e2e/browser.mjs";

const require = createRequire(new URL("../frontend/package.json", import.meta.url));
/** @type {typeof import("playwright-core")} */
const { chromium } = require("playwright-core");
const DIST = fileURLToPath(new URL("../frontend/dist/assets/", import.meta.url));

/** @param {string} name */
function env(name) {
  const value = process.env[name];
  if (!value) throw new Error(`environment variable ${name} is required`);
  return value;
}

/** @param {string} message */
function log(message) {
  process.stdout.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

/** @param {Record<string, unknown>} result */
function emit(result) {
  process.stdout.write(`BENCH ${JSON.stringify(result)}\n`);
}

// browser.mjs's flags (Chromium dials out without them, which this network refuses), and the
// precise heap figures of performance.memory.
const LAUNCH_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--enable-precise-memory-info",
];

const RENDER_TIMEOUT_MS = 180_000;

/**
 * In every document of the context, before the page's own scripts: a larger resource-timing
 * buffer (two GETs per run would overflow the default 250), and a check at every animation
 * frame of whether the charts are drawn, its first success kept as window.__benchRendered.
 * @param {number} charts
 */
function initScript(charts) {
  return `(() => {
    performance.setResourceTimingBufferSize(10000);
    const check = (t) => {
      const figures = document.querySelectorAll('[data-testid^="compare-chart-"]');
      const drawn = figures.length === ${charts}
        && [...figures].every((f) => f.querySelector("canvas") !== null)
        && document.querySelector(".compare-chart-loading") === null;
      if (drawn) window.__benchRendered = performance.now();
      else requestAnimationFrame(check);
    };
    requestAnimationFrame(check);
  })();`;
}

/**
 * A new tab on `url`, waited for until drawn; the timings (ms from navigation start) and sizes
 * read from the page.
 * @param {import("playwright-core").BrowserContext} context
 * @param {string} url
 * @param {string[]} errors
 * @param {boolean} profiled the sampling profiler on from before the navigation to the render
 */
async function load(context, url, errors, profiled = false) {
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  const stopProfiler = profiled ? await startProfiler(cdp) : null;
  page.on("pageerror", (error) => errors.push(`page error: ${error.message}`));
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(`console: ${message.text()}`);
  });
  /** @type {unknown[]} */
  const bodies = [];
  page.on("request", (request) => {
    if (request.method() === "POST" && new URL(request.url()).pathname === "/api/v1/metrics/query") {
      bodies.push(request.postDataJSON());
    }
  });
  let websockets = 0;
  page.on("websocket", () => (websockets += 1));
  const started = Date.now();
  await page.goto(url, { waitUntil: "commit" });
  await page.waitForFunction(() => "__benchRendered" in window, undefined, { timeout: RENDER_TIMEOUT_MS, polling: 100 }).catch(async () => {
    const alert = await page.locator('[role="alert"]').first().innerText().catch(() => "");
    throw new Error(`the charts were not drawn within ${RENDER_TIMEOUT_MS / 1000} s${alert ? `: ${alert}` : ""}`);
  });
  const timing = await page.evaluate(() => {
    const entries = /** @type {PerformanceResourceTiming[]} */ (performance.getEntriesByType("resource"));
    const queries = entries.filter((e) => e.name.includes("/api/v1/metrics/query"));
    // The runs' details and keys: POST /compare/runs, or (a refused one, an older page) 2 GETs a run.
    const runReads = entries.filter((e) => /\/api\/v1\/(runs\/\d+(\/metrics\/keys)?|compare\/runs)$/.test(new URL(e.name).pathname));
    /** @param {number[]} xs */
    const middle = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
    // Server time as the browser sees it: request sent → first byte (no queueing for a connection).
    const waits = (/** @type {RegExp} */ kind) =>
      middle(runReads.filter((e) => kind.test(e.name)).map((e) => e.responseStart - e.requestStart));
    return {
      rendered: /** @type {number} */ (/** @type {any} */ (window).__benchRendered),
      runs_requests: runReads.length,
      detail_wait: waits(/\/runs\/\d+$/),
      keys_wait: waits(/\/metrics\/keys$/),
      bulk_runs_wait: waits(/\/compare\/runs$/),
      runs_start: Math.min(...runReads.map((e) => e.startTime)),
      runs_loaded: Math.max(0, ...runReads.map((e) => e.responseEnd)),
      dom_loaded: /** @type {PerformanceNavigationTiming} */ (performance.getEntriesByType("navigation")[0]).domContentLoadedEventEnd,
      queries: queries.length,
      query_start: Math.min(...queries.map((e) => e.startTime)),
      query_ttfb: Math.max(...queries.map((e) => e.responseStart - e.startTime)),
      query_end: Math.max(...queries.map((e) => e.responseEnd)),
      query_bytes: queries.reduce((sum, e) => sum + e.encodedBodySize, 0),
    };
  });
  const profile = stopProfiler ? await stopProfiler() : null;
  const before = await cdp.send("Runtime.getHeapUsage");
  await cdp.send("HeapProfiler.collectGarbage");
  const after = await cdp.send("Runtime.getHeapUsage");
  return {
    page,
    cdp,
    profile,
    bodies,
    websockets: () => websockets,
    result: { ...timing, wall: Date.now() - started, heap_before: before.usedSize, heap_after: after.usedSize },
  };
}

/** Frames, long tasks and canvases from now on, in the page: window.__benchLive. */
function startRecording() {
  const w = /** @type {any} */ (window);
  const live = { frames: /** @type {number[]} */ ([]), longTasks: /** @type {number[]} */ ([]), added: 0, stopped: false, start: performance.now() };
  w.__benchLive = live;
  w.__benchCanvases = [...document.querySelectorAll('[data-testid^="compare-chart-"] canvas')];
  let last = -1;
  const frame = (/** @type {number} */ t) => {
    if (last >= 0) live.frames.push(t - last);
    last = t;
    if (!live.stopped) requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
  const observer = new MutationObserver((records) => {
    for (const record of records) {
      for (const node of record.addedNodes) {
        if (!(node instanceof Element)) continue;
        if (node.nodeName === "CANVAS") live.added += 1;
        live.added += node.querySelectorAll("canvas").length;
      }
    }
  });
  observer.observe(document.body, { childList: true, subtree: true });
  const tasks = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) live.longTasks.push(entry.duration);
  });
  tasks.observe({ type: "longtask" });
  w.__benchStop = () => {
    live.stopped = true;
    observer.disconnect();
    tasks.disconnect();
    const kept = w.__benchCanvases.filter((/** @type {Element} */ c) => c.isConnected).length;
    return {
      frames: live.frames,
      long_tasks: live.longTasks,
      canvases_added: live.added,
      canvases_at_start: w.__benchCanvases.length,
      canvases_kept: kept,
      window_ms: performance.now() - live.start,
    };
  };
}

/**
 * Each run's value of `key` in the final-values table: {runId: value}.
 * @param {string} key
 */
function finalValues(key) {
  const heads = [...document.querySelectorAll('[data-testid="final-table"] thead th')];
  const column = heads.findIndex((th) => (th.textContent ?? "").replace(/[▲▼]/g, "").trim() === key);
  /** @type {Record<string, number | null>} */
  const out = {};
  if (column < 0) return out;
  for (const row of document.querySelectorAll('[data-testid^="final-row-r:"]')) {
    const id = (row.getAttribute("data-testid") ?? "").replace("final-row-r:", "");
    const text = row.children[column]?.firstElementChild?.textContent ?? "";
    const value = Number(text.replace(/,/g, ""));
    out[id] = text !== "" && Number.isFinite(value) ? value : null;
  }
  return out;
}

/**
 * @param {import("playwright-core").CDPSession} cdp
 * @returns {Promise<() => Promise<any>>} stops the profiler and returns its profile
 */
async function startProfiler(cdp) {
  await cdp.send("Profiler.enable");
  await cdp.send("Profiler.setSamplingInterval", { interval: 500 });
  await cdp.send("Profiler.start");
  return async () => (await cdp.send("Profiler.stop")).profile;
}

/**
 * Self and total milliseconds per function (its source position, through the source map) and
 * per source file; a function counted once per sample however often it is on the stack.
 * @param {any} profile a CDP Profiler.Profile
 * @param {number} top
 */
function summarize(profile, top = 15) {
  const { SourceMapConsumer } = require("source-map-js");
  /** @type {Map<string, any>} */
  const maps = new Map();
  /** @param {any} frame */
  const place = (frame) => {
    if (!frame.url) return { fn: frame.functionName || "(anonymous)", file: frame.functionName.startsWith("(") ? frame.functionName : "(native)" };
    const bundle = path.basename(new URL(frame.url).pathname);
    if (!maps.has(bundle)) {
      const file = path.join(DIST, `${bundle}.map`);
      maps.set(bundle, existsSync(file) ? new SourceMapConsumer(JSON.parse(readFileSync(file, "utf8"))) : null);
    }
    const map = maps.get(bundle);
    const at = map?.originalPositionFor({ line: frame.lineNumber + 1, column: frame.columnNumber });
    if (!at?.source) return { fn: `${frame.functionName || "(anonymous)"} ${bundle}:${frame.lineNumber + 1}:${frame.columnNumber}`, file: bundle };
    const file = at.source.replace(/^(\.\.\/)+/, "");
    return { fn: `${file}:${at.line} ${at.name ?? frame.functionName ?? ""}`.trim(), file };
  };
  /** @type {Map<number, number>} */
  const parent = new Map();
  for (const n of profile.nodes) for (const child of n.children ?? []) parent.set(child, n.id);
  /** @type {Map<number, {fn: string, file: string}>} */
  const placeOf = new Map();
  for (const n of profile.nodes) placeOf.set(n.id, place(n.callFrame));
  /** @type {Map<number, {fns: Set<string>, files: Set<string>}>} */
  const stacks = new Map();
  /** @param {number} id */
  const stackOf = (id) => {
    let known = stacks.get(id);
    if (known) return known;
    const up = parent.has(id) ? stackOf(/** @type {number} */ (parent.get(id))) : { fns: new Set(), files: new Set() };
    const here = /** @type {{fn: string, file: string}} */ (placeOf.get(id));
    known = { fns: new Set(up.fns).add(here.fn), files: new Set(up.files).add(here.file) };
    stacks.set(id, known);
    return known;
  };
  /** @type {Record<string, Map<string, number>>} */
  const sums = { selfFn: new Map(), totalFn: new Map(), selfFile: new Map(), totalFile: new Map() };
  /** @param {Map<string, number>} m @param {string} k @param {number} v */
  const add = (m, k, v) => m.set(k, (m.get(k) ?? 0) + v);
  let sampled = 0;
  let idle = 0;
  profile.samples.forEach((/** @type {number} */ id, /** @type {number} */ i) => {
    const ms = (profile.timeDeltas[i + 1] ?? 0) / 1000;
    const here = /** @type {{fn: string, file: string}} */ (placeOf.get(id));
    sampled += ms;
    if (here.fn === "(idle)") {
      idle += ms;
      return;
    }
    add(sums.selfFn, here.fn, ms);
    add(sums.selfFile, here.file, ms);
    const { fns, files } = stackOf(id);
    for (const fn of fns) add(sums.totalFn, fn, ms);
    for (const file of files) add(sums.totalFile, file, ms);
  });
  /** @param {Map<string, number>} m */
  const best = (m) => [...m].sort((a, b) => b[1] - a[1]).slice(0, top).map(([name, ms]) => [name, Math.round(ms)]);
  return {
    sampled_ms: Math.round(sampled),
    idle_ms: Math.round(idle),
    self_fn: best(sums.selfFn),
    // Library frames (React's scheduler, say) are on every stack; the app's own say more.
    total_fn: best(new Map([...sums.totalFn].filter(([name]) => name.startsWith("src/")))),
    self_file: best(sums.selfFile),
    total_file: best(sums.totalFile).filter(([name]) => !String(name).startsWith("(root)")),
  };
}

/** The next line on stdin. */
function stdinLines() {
  const lines = createInterface({ input: process.stdin });
  const iterator = lines[Symbol.asyncIterator]();
  return async () => {
    const next = await iterator.next();
    return next.done ? null : String(next.value);
  };
}

async function main() {
  const base = env("BARREL_URL").replace(/\/+$/, "");
  const url = `${base}${env("BENCH_PATH")}`;
  const charts = Number(env("BENCH_CHARTS"));
  const repeats = Number(env("BENCH_REPEATS"));
  const stepKey = env("BENCH_STEP_KEY");
  const browser = await chromium.launch({ executablePath: process.env.BARREL_CHROMIUM || "/usr/bin/chromium", headless: true, args: LAUNCH_ARGS });
  try {
    const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
    const first = await context.newPage();
    await login(first, base, env("BARREL_USER"), env("BARREL_PASSWORD"));
    await first.close();
    await context.addInitScript(initScript(charts));
    /** @type {string[]} */
    const errors = [];

    log("untimed load");
    const warm = await load(context, url, errors);
    await warm.page.close();
    const loads = [];
    /** @type {unknown[]} */
    let bodies = [];
    for (let i = 0; i < repeats; i++) {
      const one = await load(context, url, errors);
      log(`load ${i + 1}/${repeats}: drawn at ${one.result.rendered.toFixed(0)} ms`);
      loads.push(one.result);
      if (i === 0) bodies = one.bodies;
      await one.page.close();
    }
    emit({ warm: warm.result, loads, bodies, errors: errors.slice(0, 20) });
    const profiling = process.env.BENCH_PROFILE === "1";
    if (profiling) {
      log("profiled load");
      const one = await load(context, url, errors, true);
      emit({ render_profile: { rendered: one.result.rendered, ...summarize(await /** @type {any} */ (one).profile) } });
      await one.page.close();
    }

    if (process.env.BENCH_LIVE === "1") {
      const next = stdinLines();
      const { page, cdp, websockets } = await load(context, url, errors);
      // The live feeds settle (sockets open, snapshots in) before the window opens.
      await page.waitForTimeout(3000);
      const stopProfiler = profiling ? await startProfiler(cdp) : null;
      await page.evaluate(startRecording);
      process.stdout.write("LIVE_START\n");
      const end = await next();
      const match = /^LIVE_END (\d+)$/.exec(end ?? "");
      if (!match) throw new Error(`expected "LIVE_END <step>" on stdin, got ${JSON.stringify(end)}`);
      const lastStep = Number(match[1]);
      const recorded = await page.evaluate(() => /** @type {any} */ (window).__benchStop());
      const liveProfile = stopProfiler ? summarize(await stopProfiler()) : null;
      const settled = Date.now();
      let seen = await page.evaluate(finalValues, stepKey);
      while (Date.now() - settled < 10_000 && !Object.values(seen).every((v) => v === lastStep)) {
        await page.waitForTimeout(250);
        seen = await page.evaluate(finalValues, stepKey);
      }
      const settleMs = Date.now() - settled;
      const liveState = await page.locator('[data-testid="live-state"]').first().innerText({ timeout: 1000 }).catch(() => "");
      const before = await cdp.send("Runtime.getHeapUsage");
      await cdp.send("HeapProfiler.collectGarbage");
      const after = await cdp.send("Runtime.getHeapUsage");
      emit({
        live: {
          ...recorded,
          steps_seen: seen,
          settle_ms: settleMs,
          websockets: websockets(),
          live_state: liveState.trim(),
          heap_before: before.usedSize,
          heap_after: after.usedSize,
        },
        ...(liveProfile ? { live_profile: liveProfile } : {}),
        errors: errors.slice(0, 20),
      });
      await page.close();
    }
  } finally {
    await browser.close();
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`FAIL: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
