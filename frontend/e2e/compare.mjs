#!/usr/bin/env node
// @ts-check
/**
 * Browser check of comparing a sweep's configs: from Groups to the group's page, asks whether
 * the sweep's grid field makes a difference on reward/mean and reads the verdict, the groups'
 * intervals and the warnings (screenshot group-compare.png, 1280 px wide); then the group's
 * diagnostics panel names the stave that bounds its runs (group-diagnostics.png).
 *
 *   BARREL_URL=http://127.0.0.1:8000 BARREL_USER=demo BARREL_PASSWORD=... BARREL_GROUP_ID=3 \
 *   BARREL_SCREENSHOT_DIR=/tmp/shots node e2e/compare.mjs
 *
 * Prints "VERDICT <sentence>" for each comparison and "WARNING <text>" for each of its warnings.
 */
import path from "node:path";

import { CheckFailed, log, login, noHorizontalScroll, noPageErrors, openBrowser, required, runCheck, screenshotDir } from "./browser.mjs";

async function main() {
  const base = required("BARREL_URL").replace(/\/+$/, "");
  const groupId = required("BARREL_GROUP_ID");
  const shots = screenshotDir();
  const { browser, page, errors } = await openBrowser();
  try {
    await login(page, base, required("BARREL_USER"), required("BARREL_PASSWORD"));
    await page.goto(`${base}/groups`, { waitUntil: "domcontentloaded" });
    const row = page.locator(`[data-testid="group-row-${groupId}"]`);
    await row.waitFor({ timeout: 15_000 }).catch(() => {
      throw new CheckFailed(`the groups page does not list group ${groupId}`);
    });
    await row.getByRole("link").click();
    await page.waitForURL(`**/groups/${groupId}`);
    const metric = page.locator('[data-testid="stats-metric"]');
    // The metric list comes from the first run's keys: wait until reward/mean is chosen.
    await page.waitForFunction(
      () => /** @type {HTMLSelectElement | null} */ (document.querySelector('[data-testid="stats-metric"]'))?.value === "reward/mean",
      undefined,
      { timeout: 15_000 },
    ).catch(async () => {
      throw new CheckFailed(`the metric picker shows ${await metric.inputValue().catch(() => "nothing")}, not reward/mean`);
    });
    await page.getByRole("button", { name: "Compare" }).click();
    const verdicts = page.locator('[data-testid="stats-verdicts"] li');
    await verdicts.first().waitFor({ timeout: 30_000 }).catch(() => {
      throw new CheckFailed("no verdict after Compare");
    });
    const count = await verdicts.count();
    for (let i = 0; i < count; i++) {
      const [first, ...rest] = (await verdicts.nth(i).innerText()).split("\n");
      console.log(`VERDICT ${first}`);
      for (const line of rest) if (line.startsWith("⚠")) console.log(`WARNING ${line.replace(/^⚠\s*/, "")}`);
    }
    const groups = await page.locator('[data-testid="stats-groups"] tbody tr').count();
    if (groups < 2) throw new CheckFailed(`the statistics show ${groups} groups`);
    log(`${groups} groups, ${count} verdicts`);
    await page.setViewportSize({ width: 1280, height: 900 });
    await noHorizontalScroll(page);
    await page.screenshot({ path: path.join(shots, "group-compare.png"), fullPage: true });
    // The group's diagnostics: the runs' diagnoses are folded by the stack's Celery a moment
    // after their points arrive, so the page is read again until every run is counted.
    const bounding = page.locator('[data-testid="group-bounding"]');
    const deadline = Date.now() + 60_000;
    let said = "";
    while (Date.now() < deadline) {
      said = await bounding.innerText({ timeout: 15_000 }).catch(() => "");
      if (said.startsWith("Bounded by") && !said.includes("without step times")) break;
      await page.waitForTimeout(1000);
      await page.reload({ waitUntil: "domcontentloaded" });
    }
    console.log(`BOUNDING ${said}`);
    const panel = page.locator('[data-testid="group-diagnostics"]');
    await panel.scrollIntoViewIfNeeded();
    await panel.screenshot({ path: path.join(shots, "group-diagnostics.png") });
    noPageErrors(errors);
  } finally {
    await browser.close();
  }
}

runCheck("compare a sweep", main);
