#!/usr/bin/env node
// @ts-check
/**
 * Browser check of a run whose work waits for cluster resources, in a 1280-px window.
 *
 *   BARREL_URL=http://127.0.0.1:8000 BARREL_USER=demo BARREL_PASSWORD=... \
 *   BARREL_RUN_ID=12 BARREL_WAITING_TEXT="2 tasks need {CPU: 1}" BARREL_SCREENSHOT_DIR=/tmp/shots \
 *   node e2e/waiting.mjs
 *
 * BARREL_RUN_ID must be a run whose tasks Ray holds back. Checks that the runs list marks it
 * (screenshot waiting-runs.png) and that its page shows a banner naming what it waits for
 * (screenshot waiting.png), then prints "BANNER SHOWN" and waits (up to
 * BARREL_CLEAR_TIMEOUT_S, default 120) until, once the cluster has room, the banner goes away
 * without a reload and the first chart appears (screenshot waiting-cleared.png).
 */
import path from "node:path";

import {
  CheckFailed,
  log,
  login,
  noHorizontalScroll,
  noPageErrors,
  openBrowser,
  required,
  runCheck,
  screenshotDir,
} from "./browser.mjs";

async function main() {
  const base = required("BARREL_URL").replace(/\/+$/, "");
  const runId = required("BARREL_RUN_ID");
  const expected = required("BARREL_WAITING_TEXT");
  const clearTimeoutMs = 1000 * Number(process.env.BARREL_CLEAR_TIMEOUT_S || 120);
  const shots = screenshotDir();
  const { browser, page, errors } = await openBrowser();
  try {
    await page.setViewportSize({ width: 1280, height: 900 });
    await login(page, base, required("BARREL_USER"), required("BARREL_PASSWORD"));

    const chip = page.locator(`[data-testid="waiting-${runId}"]`);
    await chip.waitFor({ timeout: 30_000 }).catch(() => {
      throw new CheckFailed(`the runs list does not mark run ${runId} as waiting`);
    });
    const title = (await chip.getAttribute("title")) ?? "";
    if (!title.includes(expected)) throw new CheckFailed(`the runs list's note is ${JSON.stringify(title)}`);
    await noHorizontalScroll(page);
    await page.screenshot({ path: path.join(shots, "waiting-runs.png") });

    await page.goto(`${base}/runs/${runId}`, { waitUntil: "domcontentloaded" });
    const banner = page.locator('[data-testid="run-waiting"]');
    await banner.waitFor({ timeout: 15_000 }).catch(() => {
      throw new CheckFailed("the run page shows no waiting banner");
    });
    const text = (await banner.innerText()).replace(/\s+/g, " ").trim();
    log(`banner: ${text}`);
    if (!text.startsWith("Waiting for cluster resources") || !text.includes(expected)) {
      throw new CheckFailed(`the banner says ${JSON.stringify(text)}; expected it to name ${JSON.stringify(expected)}`);
    }
    await noHorizontalScroll(page);
    await page.screenshot({ path: path.join(shots, "waiting.png") });
    process.stdout.write("BANNER SHOWN\n");

    await banner.waitFor({ state: "detached", timeout: clearTimeoutMs }).catch(() => {
      throw new CheckFailed(`the banner is still shown ${clearTimeoutMs / 1000} s after it was`);
    });
    await page.locator('[data-testid^="points-"]').first().waitFor({ timeout: 60_000 }).catch(() => {
      throw new CheckFailed("the banner went, but no chart came");
    });
    log("the banner went away live and the charts came");
    await page.screenshot({ path: path.join(shots, "waiting-cleared.png") });
    noPageErrors(errors);
  } catch (error) {
    await page.screenshot({ path: path.join(shots, "failure.png"), fullPage: true }).catch(() => undefined);
    if (errors.length > 0) log(`browser errors:\n  ${errors.slice(-20).join("\n  ")}`);
    throw error;
  } finally {
    await browser.close();
  }
}

runCheck("e2e/waiting.mjs", main);
