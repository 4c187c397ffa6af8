#!/usr/bin/env node
// @ts-check
/**
 * Browser check of the live dashboard against a running Barrel stack.
 *
 *   BARREL_URL=http://127.0.0.1:8000 BARREL_USER=demo BARREL_PASSWORD=... \
 *   BARREL_RUN_ID=12 BARREL_SCREENSHOT_DIR=/tmp/shots node e2e/live.mjs
 *
 * Logs in, finds the run in the runs table (screenshot runs.png), opens it,
 * waits for a metric chart, and waits until a chart's point count grows
 * without a page reload, i.e. live points arrived over the websocket
 * (screenshot run.png); then switches the x axis to relative time and waits
 * for that chart to grow again, its legend showing time and step on hover
 * (run-relative-time.png), and shows the wall clock (run-wall-clock.png). BARREL_RUN_ID must be
 * RUNNING and receiving metrics.
 *
 * Optional: BARREL_METRIC_KEY (watch only this key), BARREL_GROWTH_TIMEOUT_S
 * (default 60), BARREL_CHROMIUM (default /usr/bin/chromium).
 * Exit 0 on success; on failure print the reason, save failure.png, exit 1.
 */
import path from "node:path";

import { CheckFailed, log, login, noPageErrors, openBrowser, required, runCheck, screenshotDir } from "./browser.mjs";

/**
 * Point counts of every chart on the page, by metric key.
 * @param {import("playwright-core").Page} page
 */
async function pointCounts(page) {
  /** @type {[string, number][]} */
  const pairs = await page.$$eval('[data-testid^="points-"]', (elements) =>
    elements.map((el) => [
      (el.getAttribute("data-testid") ?? "").slice("points-".length),
      Number((el.textContent ?? "").trim()),
    ]),
  );
  return new Map(pairs);
}

async function main() {
  const base = required("BARREL_URL").replace(/\/+$/, "");
  const user = required("BARREL_USER");
  const password = required("BARREL_PASSWORD");
  const runId = required("BARREL_RUN_ID");
  if (!/^\d+$/.test(runId)) throw new CheckFailed(`BARREL_RUN_ID must be a run id, got ${JSON.stringify(runId)}`);
  const shots = screenshotDir();
  const watchKey = process.env.BARREL_METRIC_KEY || null;
  const growthTimeoutMs = 1000 * Number(process.env.BARREL_GROWTH_TIMEOUT_S || 60);

  const { browser, page, errors: browserErrors } = await openBrowser();

  try {
    await login(page, base, user, password);

    // ---- runs table
    const row = page.locator(`[data-testid="run-row-${runId}"]`);
    try {
      await row.waitFor({ timeout: 10_000 });
    } catch {
      // Not on the first page (newest first): filter the table by the run's name.
      const response = await page.request.get(`${base}/api/v1/runs/${runId}`);
      if (!response.ok()) throw new CheckFailed(`GET /api/v1/runs/${runId} answered ${response.status()}`);
      const { name } = await response.json();
      log(`run ${runId} not on the first page; filtering by name ${JSON.stringify(name)}`);
      await page.goto(`${base}/?name=${encodeURIComponent(name)}`, { waitUntil: "domcontentloaded" });
      await row.waitFor({ timeout: 15_000 }).catch(() => {
        throw new CheckFailed(`run ${runId} does not appear in the runs table`);
      });
    }
    const listedStatus = (await page.locator(`[data-testid="status-${runId}"]`).innerText()).trim();
    log(`run ${runId} listed with status ${listedStatus}`);
    await page.screenshot({ path: path.join(shots, "runs.png"), fullPage: true });

    // ---- run page
    await row.click();
    await page.waitForURL((url) => url.pathname === `/runs/${runId}`, { timeout: 15_000 });
    const status = page.locator('[data-testid="run-status"]');
    await status.waitFor({ timeout: 15_000 }).catch(() => {
      throw new CheckFailed(`run page /runs/${runId} shows no status`);
    });
    log(`run page open, status ${(await status.innerText()).trim()}`);

    const pointsSelector = watchKey ? `[data-testid="points-${watchKey}"]` : '[data-testid^="points-"]';
    await page
      .locator(pointsSelector)
      .first()
      .waitFor({ timeout: 60_000 })
      .catch(() => {
        throw new CheckFailed(`no chart${watchKey ? ` for ${watchKey}` : ""} appeared within 60 s on /runs/${runId}`);
      });

    // A marker on window: if the page reloads, it is gone, and growth would not prove live updates.
    await page.evaluate(() => {
      /** @type {any} */ (window).__barrelE2eNoReload = true;
    });
    const before = await pointCounts(page);
    const described = [...before].map(([k, n]) => `${k}=${n}`).join(", ");
    log(`charts: ${before.size} (${described.length > 300 ? `${described.slice(0, 300)}…` : described})`);

    // ---- wait for live growth
    const deadline = Date.now() + growthTimeoutMs;
    /** @type {{ key: string, from: number, to: number } | null} */
    let grown = null;
    while (!grown && Date.now() < deadline) {
      await page.waitForTimeout(500);
      const now = await pointCounts(page);
      for (const [key, count] of now) {
        if (watchKey && key !== watchKey) continue;
        const from = before.get(key) ?? 0;
        if (count > from) {
          grown = { key, from, to: count };
          break;
        }
      }
    }
    if (!grown) {
      const live = await page.locator('[data-testid="live-state"]').innerText().catch(() => "?");
      throw new CheckFailed(
        `no chart's point count grew within ${growthTimeoutMs / 1000} s (websocket state: ${live.trim()}); ` +
          `is run ${runId} RUNNING and reporting metrics?`,
      );
    }
    const stillSamePage = await page.evaluate(() => /** @type {any} */ (window).__barrelE2eNoReload === true);
    if (!stillSamePage) throw new CheckFailed("the page reloaded while waiting; growth was not live");
    log(`live: ${grown.key} grew from ${grown.from} to ${grown.to} points without a reload`);
    noPageErrors(browserErrors);
    await page.screenshot({ path: path.join(shots, "run.png"), fullPage: true });

    // ---- the same charts against relative time: read again with wall times, still live
    await page.locator('[data-testid="x-axis"]').selectOption("relative");
    const timedChart = page.locator(`[data-testid="chart-${grown.key}"]`);
    await timedChart.locator('[data-testid^="points-"]').waitFor({ timeout: 30_000 });
    const xLegend = (await timedChart.locator(".u-legend .u-series").first().innerText()).trim();
    if (!xLegend.startsWith("time")) throw new CheckFailed(`against relative time the legend's x is ${JSON.stringify(xLegend)}, not the time`);
    const timedFrom = Number((await timedChart.locator('[data-testid^="points-"]').innerText()).trim());
    await page
      .waitForFunction(
        ([selector, from]) => Number(document.querySelector(selector)?.textContent?.trim() ?? "0") > from,
        /** @type {[string, number]} */ ([`[data-testid="points-${grown.key}"]`, timedFrom]),
        { timeout: growthTimeoutMs },
      )
      .catch(() => {
        throw new CheckFailed(`against relative time, ${grown?.key} received no live point`);
      });
    log(`relative time: ${grown.key} grew past ${timedFrom} points live`);
    // Hovering a point shows its time and its step.
    const over = await timedChart.locator(".u-over").boundingBox();
    if (over) await page.mouse.move(over.x + over.width * 0.98, over.y + over.height / 2);
    const hovered = (await timedChart.locator(".u-legend .u-series").first().innerText()).trim();
    if (!/\d(s|min|h).* · step \d+/.test(hovered)) throw new CheckFailed(`hovering shows ${JSON.stringify(hovered)}, not a time and a step`);
    log(`hover: ${hovered}`);
    noPageErrors(browserErrors);
    await page.screenshot({ path: path.join(shots, "run-relative-time.png"), fullPage: true });
    await page.locator('[data-testid="x-axis"]').selectOption("wall");
    await timedChart.locator('[data-testid^="points-"]').waitFor({ timeout: 30_000 });
    await page.screenshot({ path: path.join(shots, "run-wall-clock.png"), fullPage: false });
    await page.locator('[data-testid="x-axis"]').selectOption("step");
    log(`screenshots in ${shots}`);
  } catch (error) {
    await page.screenshot({ path: path.join(shots, "failure.png"), fullPage: true }).catch(() => undefined);
    if (browserErrors.length > 0) log(`browser errors:\n  ${browserErrors.slice(-20).join("\n  ")}`);
    throw error;
  } finally {
    await browser.close();
  }
}

runCheck("e2e/live.mjs", main);
