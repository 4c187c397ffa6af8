#!/usr/bin/env node
// @ts-check
/**
 * The browser side of benchmarks/diagnosis_page.py: headless Chromium on run pages of a bench
 * stack (frontend/e2e/browser.mjs: launch and login through the form).
 *
 *   BARREL_URL=http://127.0.0.1:8000 BARREL_USER=bench BARREL_PASSWORD=... \
 *   BENCH_RUNS=1,2 BENCH_REPEATS=5 BENCH_SCREENSHOT=/tmp/panel.png node benchmarks/diagnosis_page.mjs
 *
 * One untimed load of each run's page, then BENCH_REPEATS rounds of one load of each, in the
 * order of BENCH_RUNS, each in a new tab of the logged-in context: the time from navigation
 * start to the first animation frame at which the Diagnostics panel shows the bounding stave,
 * the barrel chart's bars, the mismatch chart's lines and the scorecard; and the resource timing
 * of GET /runs/{id}/diagnosis. Then a screenshot of the last run's panel to BENCH_SCREENSHOT.
 *
 * Results go to stdout as lines "BENCH <json>"; anything else printed is a log line.
 */
import { log, login, openBrowser, required, runCheck } from "../frontend/e2e/browser.mjs";

const RENDER_TIMEOUT_MS = 120_000;

/** Checked at every animation frame from before the page's own scripts; the first success kept. */
const INIT_SCRIPT = `(() => {
  const check = () => {
    const panel = document.querySelector('[data-testid="diagnostics"]');
    const drawn = panel !== null
      && panel.querySelector('[data-testid="bounding"]') !== null
      && panel.querySelector('[data-testid="barrel"] svg rect') !== null
      && panel.querySelector('[data-testid="mismatch"] svg polyline') !== null
      && panel.querySelector('[data-testid="scorecard"]') !== null;
    if (drawn) window.__benchRendered = performance.now();
    else requestAnimationFrame(check);
  };
  requestAnimationFrame(check);
})();`;

/**
 * A new tab on the run's page, waited for until the panel is drawn; its timings and what it drew.
 * @param {import("playwright-core").BrowserContext} context
 * @param {string} url
 * @param {string[]} errors
 */
async function load(context, url, errors) {
  const page = await context.newPage();
  page.on("pageerror", (error) => errors.push(`page error: ${error.message}`));
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(`console: ${message.text()}`);
  });
  await page.goto(url, { waitUntil: "commit" });
  await page.waitForFunction(() => "__benchRendered" in window, undefined, { timeout: RENDER_TIMEOUT_MS, polling: 50 }).catch(async () => {
    const text = await page.locator('[data-testid="diagnostics"]').innerText().catch(() => "");
    throw new Error(`the diagnostics panel was not drawn within ${RENDER_TIMEOUT_MS / 1000} s: ${text.slice(0, 300)}`);
  });
  const result = await page.evaluate(() => {
    const entries = /** @type {PerformanceResourceTiming[]} */ (performance.getEntriesByType("resource"));
    const read = entries.find((e) => /\/api\/v1\/runs\/\d+\/diagnosis$/.test(new URL(e.name).pathname));
    const panel = /** @type {Element} */ (document.querySelector('[data-testid="diagnostics"]'));
    const lines = [...panel.querySelectorAll('[data-testid="mismatch"] svg polyline')];
    return {
      rendered: /** @type {number} */ (/** @type {any} */ (window).__benchRendered),
      request_start: read?.startTime ?? NaN,
      request_end: read?.responseEnd ?? NaN,
      bytes: read?.encodedBodySize ?? 0,
      rects: panel.querySelectorAll('[data-testid="barrel"] svg rect').length,
      polylines: lines.length,
      points: lines.reduce((sum, l) => sum + (l.getAttribute("points") ?? "").trim().split(/\s+/).length, 0),
      bounding: (panel.querySelector('[data-testid="bounding"] strong')?.textContent ?? "").trim(),
    };
  });
  return { page, result };
}

async function main() {
  const base = required("BARREL_URL").replace(/\/+$/, "");
  const runs = required("BENCH_RUNS").split(",");
  const repeats = Number(required("BENCH_REPEATS"));
  const { browser, page: first, errors } = await openBrowser();
  try {
    const context = first.context();
    await login(first, base, required("BARREL_USER"), required("BARREL_PASSWORD"));
    await first.close();
    await context.addInitScript(INIT_SCRIPT);
    for (const run of runs) {
      const warm = await load(context, `${base}/runs/${run}`, errors);
      log(`untimed load of run ${run}: drawn at ${warm.result.rendered.toFixed(0)} ms`);
      await warm.page.close();
    }
    /** @type {Record<string, unknown[]>} */
    const loads = Object.fromEntries(runs.map((run) => [run, []]));
    for (let i = 0; i < repeats; i++) {
      for (const run of runs) {
        const one = await load(context, `${base}/runs/${run}`, errors);
        log(`load ${i + 1}/${repeats} of run ${run}: drawn at ${one.result.rendered.toFixed(0)} ms`);
        loads[run].push(one.result);
        await one.page.close();
      }
    }
    const last = await load(context, `${base}/runs/${runs[runs.length - 1]}`, errors);
    await last.page.locator('[data-testid="diagnostics"]').screenshot({ path: required("BENCH_SCREENSHOT") });
    await last.page.close();
    process.stdout.write(`BENCH ${JSON.stringify({ loads, errors: errors.slice(0, 20) })}\n`);
  } finally {
    await browser.close();
  }
}

runCheck("diagnosis page", main);
