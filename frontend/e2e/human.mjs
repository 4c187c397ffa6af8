#!/usr/bin/env node
// @ts-check
/**
 * Browser check of a run's human score: its page shows the eval that ranked its checkpoints,
 * a row per checkpoint with its score and 95 % interval, and the chart on the step axis of the
 * proxy reward (screenshot human-score.png).
 *
 *   BARREL_URL=http://127.0.0.1:8000 BARREL_USER=demo BARREL_PASSWORD=... BARREL_RUN_ID=12 \
 *   BARREL_SCREENSHOT_DIR=/tmp/shots node e2e/human.mjs
 */
import path from "node:path";

import { CheckFailed, log, login, noHorizontalScroll, noPageErrors, openBrowser, required, runCheck, screenshotDir } from "./browser.mjs";

async function main() {
  const base = required("BARREL_URL").replace(/\/+$/, "");
  const runId = required("BARREL_RUN_ID");
  const shots = screenshotDir();
  const { browser, page, errors } = await openBrowser();
  try {
    await login(page, base, required("BARREL_USER"), required("BARREL_PASSWORD"));
    await page.goto(`${base}/runs/${runId}`, { waitUntil: "domcontentloaded" });
    const panel = page.locator('[data-testid="human-eval"]');
    await panel.waitFor({ timeout: 30_000 }).catch(() => {
      throw new CheckFailed(`run ${runId}'s page shows no human score`);
    });
    const rows = panel.locator('[data-testid="human-table"] tbody tr');
    const count = await rows.count();
    if (count < 2) throw new CheckFailed(`the human score lists ${count} checkpoints`);
    for (let i = 0; i < count; i++) {
      const text = await rows.nth(i).innerText();
      if (!/\d+ \[\d+, \d+\]/.test(text)) throw new CheckFailed(`row ${i} shows no score with an interval: ${text}`);
    }
    // The chart drew: uPlot's canvas and its legend naming both series.
    await panel.locator('[data-testid="human-chart"] canvas').waitFor({ timeout: 10_000 });
    const legend = await panel.locator('[data-testid="human-chart"] .u-legend').innerText();
    for (const name of ["human score", "reward/mean"]) {
      if (!legend.includes(name)) throw new CheckFailed(`the chart's legend lacks ${name}: ${legend}`);
    }
    log(`${count} checkpoints with their human score`);
    await noHorizontalScroll(page);
    await panel.scrollIntoViewIfNeeded();
    await panel.screenshot({ path: path.join(shots, "human-score.png") });
    noPageErrors(errors);
  } finally {
    await browser.close();
  }
}

runCheck("human score", main);
