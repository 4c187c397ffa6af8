#!/usr/bin/env node
// @ts-check
/**
 * Browser check of picking and overlaying a sweep's runs. First the runs table, filtered to the
 * group with reward/mean as a column, sorted by it from its header (screenshot runs-table.png);
 * two runs ticked and compared, landing on /compare?runs=<a>,<b>. Then /compare?group=<id>: waits for the charts,
 * reads the legend (one entry per run), groups the runs by the sweep's grid field (two groups of
 * three runs expected), drags a zoom on the first chart and checks that the page then asked
 * POST /api/v1/metrics/query for that step range (screenshots compare-overlay.png and
 * compare-grouped.png, 1280 px wide).
 *
 *   BARREL_URL=http://127.0.0.1:8000 BARREL_USER=demo BARREL_PASSWORD=... BARREL_GROUP_ID=3 \
 *   BARREL_SCREENSHOT_DIR=/tmp/shots node e2e/overlay.mjs
 *
 * Prints "RUNROW <id> <value>" for each row of the sorted runs table, "PICKED <url>" for the
 * compare page the selection opened, "LEGEND run <name> #<id>" for each run's legend entry, then, once grouped,
 * "LEGEND group <field>=<value> (<n> runs)" for each group's, and "ZOOM <start> <end>" for the
 * zoomed range the page asked for.
 */
import path from "node:path";

import { CheckFailed, log, login, noHorizontalScroll, noPageErrors, openBrowser, required, runCheck, screenshotDir } from "./browser.mjs";

/** @param {string} text */
function oneLine(text) {
  return text.replace(/\s+/g, " ").trim();
}

async function main() {
  const base = required("BARREL_URL").replace(/\/+$/, "");
  const groupId = required("BARREL_GROUP_ID");
  const shots = screenshotDir();
  const { browser, page, errors } = await openBrowser();
  try {
    await login(page, base, required("BARREL_USER"), required("BARREL_PASSWORD"));
    await page.setViewportSize({ width: 1280, height: 900 });

    /** @type {{ runs?: number[], keys?: string[], start?: number, end?: number }[]} */
    const queries = [];
    page.on("request", (request) => {
      if (request.method() !== "POST" || new URL(request.url()).pathname !== "/api/v1/metrics/query") return;
      try {
        queries.push(request.postDataJSON() ?? {});
      } catch {
        queries.push({});
      }
    });

    log(`open the runs table of group ${groupId} with reward/mean as a column`);
    await page.goto(`${base}/?group=${groupId}&metrics=${encodeURIComponent("reward/mean")}`, { waitUntil: "domcontentloaded" });
    const cells = page.locator('[data-testid^="metric-"]');
    await cells.first().waitFor({ timeout: 30_000 }).catch(() => {
      throw new CheckFailed("the runs table shows no reward/mean value");
    });
    await page.getByRole("button", { name: /^reward\/mean/ }).click();
    await page.waitForURL(/sort=-metric/, { timeout: 10_000 }).catch(() => {
      throw new CheckFailed("sorting by the reward/mean header left the URL without the sort");
    });
    // The table follows the URL and shows the previous answer until the sorted one arrives.
    await page.locator('th[aria-sort="descending"]').waitFor({ timeout: 10_000 });
    await page.locator('[data-testid="runs-updating"]').waitFor({ state: "detached", timeout: 15_000 });
    const sorted = await cells.evaluateAll((nodes) =>
      nodes.map((n) => `${n.getAttribute("data-testid")?.split("-")[1]} ${n.textContent?.trim()}`),
    );
    for (const row of sorted) console.log(`RUNROW ${row}`);
    await noHorizontalScroll(page);
    await page.screenshot({ path: path.join(shots, "runs-table.png"), fullPage: true });
    const picked = sorted.slice(0, 2).map((row) => row.split(" ")[0]);
    for (const id of picked) await page.getByRole("checkbox", { name: `select run ${id}` }).check();
    await page.getByRole("region", { name: "selected runs" }).getByRole("button", { name: "Compare" }).click();
    await page.waitForURL(/\/compare\?runs=/, { timeout: 10_000 }).catch(() => {
      throw new CheckFailed("Compare on two selected runs did not open the compare page");
    });
    console.log(`PICKED ${new URL(page.url()).pathname}${new URL(page.url()).search}`);

    log(`open ${base}/compare?group=${groupId}`);
    await page.goto(`${base}/compare?group=${groupId}`, { waitUntil: "domcontentloaded" });
    const charts = page.locator('[data-testid^="compare-chart-"]');
    await charts.first().locator("canvas").first().waitFor({ timeout: 30_000 }).catch(async () => {
      const alert = await page.locator('[role="alert"]').first().innerText().catch(() => "");
      throw new CheckFailed(`no chart on the compare page${alert ? `: ${oneLine(alert)}` : ""}`);
    });
    // The charts show "Loading…" until the metrics answer is drawn.
    await page
      .waitForFunction(() => document.querySelector(".compare-chart-loading") === null, undefined, { timeout: 30_000 })
      .catch(() => {
        throw new CheckFailed("the charts never got their data");
      });
    const chartKeys = await charts.evaluateAll((nodes) => nodes.map((n) => n.getAttribute("data-testid")?.replace("compare-chart-", "")));
    log(`charts: ${chartKeys.join(", ")}`);
    if (queries.length === 0) throw new CheckFailed("the page drew charts without asking POST /api/v1/metrics/query");

    const labels = page.locator('[data-testid="legend-label"]');
    const runs = (await labels.allInnerTexts()).map(oneLine);
    for (const label of runs) console.log(`LEGEND run ${label}`);
    if (runs.length < 2) throw new CheckFailed(`the legend lists ${runs.length} runs`);
    await noHorizontalScroll(page);
    await page.screenshot({ path: path.join(shots, "compare-overlay.png"), fullPage: true });

    // Group by the sweep's grid field: the picker lists those first, marked data-grid.
    const picker = page.locator('[data-testid="group-by"]');
    const field = await picker.locator("option[data-grid]").first().getAttribute("value", { timeout: 5_000 }).catch(() => null);
    if (!field) throw new CheckFailed("the group-by picker offers no grid field of the sweep");
    log(`group by ${field}`);
    await picker.selectOption(field);
    await page
      .waitForFunction(
        (count) => document.querySelectorAll('[data-testid="legend-entry"]').length < count,
        runs.length,
        { timeout: 15_000 },
      )
      .catch(() => {
        throw new CheckFailed(`the legend still lists ${runs.length} entries after grouping by ${field}`);
      });
    const groups = (await labels.allInnerTexts()).map(oneLine);
    for (const label of groups) console.log(`LEGEND group ${label}`);
    if (groups.length !== 2) throw new CheckFailed(`grouped by ${field}, the legend lists ${groups.length} groups, not 2`);
    const notThree = groups.filter((label) => !label.includes("(3 runs)"));
    if (notThree.length > 0) throw new CheckFailed(`groups without "(3 runs)": ${notThree.join("; ")}`);
    await noHorizontalScroll(page);
    await page.screenshot({ path: path.join(shots, "compare-grouped.png"), fullPage: true });

    // Drag across the middle of the first chart: every chart zooms, and the page asks for the range.
    const before = queries.length;
    const over = charts.first().locator(".u-over");
    await over.scrollIntoViewIfNeeded();
    const box = await over.boundingBox();
    if (!box) throw new CheckFailed("the first chart has no plotting area");
    const y = box.y + box.height / 2;
    await page.mouse.move(box.x + box.width * 0.3, y);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.5, y, { steps: 5 });
    await page.mouse.move(box.x + box.width * 0.7, y, { steps: 5 });
    await page.mouse.up();
    const deadline = Date.now() + 15_000;
    let zoomed = queries.slice(before).find((q) => typeof q.start === "number" && typeof q.end === "number");
    while (!zoomed) {
      if (Date.now() > deadline) {
        throw new CheckFailed(`no POST /api/v1/metrics/query with start and end after the drag (${queries.length - before} without)`);
      }
      await page.waitForTimeout(200);
      zoomed = queries.slice(before).find((q) => typeof q.start === "number" && typeof q.end === "number");
    }
    console.log(`ZOOM ${zoomed.start} ${zoomed.end}`);
    if (/** @type {number} */ (zoomed.start) >= /** @type {number} */ (zoomed.end)) {
      throw new CheckFailed(`the zoomed range is empty: ${zoomed.start}–${zoomed.end}`);
    }
    await page.locator('[data-testid="zoom-state"]').waitFor({ timeout: 5_000 }).catch(() => {
      throw new CheckFailed("the page does not say it is zoomed");
    });
    log(`zoomed to steps ${zoomed.start}–${zoomed.end}`);
    noPageErrors(errors);
  } finally {
    await browser.close();
  }
}

runCheck("overlay a sweep's runs", main);
