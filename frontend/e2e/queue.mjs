#!/usr/bin/env node
// @ts-check
/**
 * Browser check of a run the scheduler holds QUEUED, in a 1280-px window.
 *
 *   BARREL_URL=http://127.0.0.1:8000 BARREL_USER=demo BARREL_PASSWORD=... \
 *   BARREL_RUN_ID=13 BARREL_ADMITTED_RUN_ID=12 BARREL_REASON_TEXT="lab's quota: 1 of 1 CPU in use" \
 *   BARREL_SCREENSHOT_DIR=/tmp/shots node e2e/queue.mjs
 *
 * BARREL_RUN_ID must be a run waiting for admission (its team's quota is full) with an estimated
 * start; BARREL_ADMITTED_RUN_ID the run holding the quota. Checks that the run's page says what
 * it waits for, when it should start (a wait with a range) and links to the queue (screenshot
 * queued-run.png); then that the queue page lists it waiting, with the same reason and estimate,
 * and the other run admitted; that the team queue's audit lists the other run's admission, linked,
 * with when, its wait and what it reserved (screenshot queue-audit.png); and that the cluster-wide
 * queue lists them too (screenshot queue.png). No page may scroll sideways.
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

// "in ~4 min (3–6 min)", "in <1 min", "in ~1 h 20 min (…)": an estimate, not "estimating…".
const ESTIMATE = /^in (~|<)\d/;

/** @param {import("playwright-core").Locator} locator */
async function text(locator) {
  return (await locator.innerText()).replace(/\s+/g, " ").trim();
}

async function main() {
  const base = required("BARREL_URL").replace(/\/+$/, "");
  const runId = required("BARREL_RUN_ID");
  const admittedId = required("BARREL_ADMITTED_RUN_ID");
  const reason = required("BARREL_REASON_TEXT");
  const shots = screenshotDir();
  const { browser, page, errors } = await openBrowser();
  try {
    await page.setViewportSize({ width: 1280, height: 900 });
    await login(page, base, required("BARREL_USER"), required("BARREL_PASSWORD"));

    await page.goto(`${base}/runs/${runId}`, { waitUntil: "domcontentloaded" });
    const banner = page.locator('[data-testid="run-waiting"]');
    await banner.waitFor({ timeout: 15_000 }).catch(() => {
      throw new CheckFailed("the queued run's page shows no banner");
    });
    const said = await text(banner);
    log(`banner: ${said}`);
    if (!said.startsWith("Queued: waiting for admission") || !said.includes(reason)) {
      throw new CheckFailed(`the banner says ${JSON.stringify(said)}; expected it to name ${JSON.stringify(reason)}`);
    }
    const eta = banner.locator('[data-testid="eta"]');
    const etaText = await text(eta);
    if (!ESTIMATE.test(etaText)) throw new CheckFailed(`the banner's estimated start is ${JSON.stringify(etaText)}`);
    const hover = (await eta.getAttribute("title")) ?? "";
    if (!/\d\d:\d\d/.test(hover)) throw new CheckFailed(`the estimate's title gives no time: ${JSON.stringify(hover)}`);
    log(`estimated start: ${etaText} (${hover})`);
    await noHorizontalScroll(page);
    await page.screenshot({ path: path.join(shots, "queued-run.png") });

    await banner.locator('[data-testid="queue-link"]').click();
    await page.waitForURL(/\/teams\/\d+\/queue$/, { timeout: 10_000 }).catch(() => {
      throw new CheckFailed(`the banner's link went to ${page.url()}, not the team's queue`);
    });
    const row = page.locator(`[data-testid="queued-run"][data-run="${runId}"]`);
    await row.waitFor({ timeout: 15_000 }).catch(() => {
      throw new CheckFailed(`the queue page does not list run ${runId} waiting`);
    });
    const rowReason = await text(row.locator('[data-testid="reason"]'));
    if (!rowReason.includes(reason)) throw new CheckFailed(`the queue's reason is ${JSON.stringify(rowReason)}`);
    const rowEta = await text(row.locator('[data-testid="eta"]'));
    if (!ESTIMATE.test(rowEta)) throw new CheckFailed(`the queue's estimated start is ${JSON.stringify(rowEta)}`);
    await page.locator(`[data-testid="admitted-run"][data-run="${admittedId}"]`).waitFor({ timeout: 15_000 }).catch(() => {
      throw new CheckFailed(`the queue page does not list run ${admittedId} admitted`);
    });
    log(`queue: run ${runId} waits (${rowReason}; ${rowEta}), run ${admittedId} admitted`);
    // The team's audit: the holder's admission, the newest first.
    const audit = page.locator('[data-testid="queue-audit"]');
    const admission = audit.locator(`[data-testid="admission"][data-run="${admittedId}"]`);
    await admission.waitFor({ timeout: 15_000 }).catch(() => {
      throw new CheckFailed(`the team's audit does not list the admission of run ${admittedId}`);
    });
    const href = await admission.locator("a").first().getAttribute("href");
    if (href !== `/runs/${admittedId}`) throw new CheckFailed(`the admission links to ${href}`);
    const cells = await admission.locator("td").allInnerTexts();
    const [, , when, waited, reserved] = cells.map((cell) => cell.replace(/\s+/g, " ").trim());
    if (!/ago$|^just now$/.test(when ?? "") || !/^\d+ (s|min)|^\d+ h/.test(waited ?? "") || !/\d CPU/.test(reserved ?? "")) {
      throw new CheckFailed(`the admission reads ${JSON.stringify(cells)}`);
    }
    const whenTitle = (await admission.locator("td").nth(2).getAttribute("title")) ?? "";
    if (!/\d\d:\d\d$/.test(whenTitle)) throw new CheckFailed(`the admission's time gives no time on hover: ${JSON.stringify(whenTitle)}`);
    log(`audit: run ${admittedId} admitted ${when} (${whenTitle}) after ${waited}, reserving ${reserved}`);
    await noHorizontalScroll(page);
    await page.screenshot({ path: path.join(shots, "queue-audit.png"), fullPage: true });
    // The cluster-wide page (the nav link) lists them too.
    await page.locator('header nav a[href="/queue"]').click();
    await page.waitForURL(/\/queue$/, { timeout: 10_000 });
    await row.waitFor({ timeout: 15_000 }).catch(() => {
      throw new CheckFailed(`/queue does not list run ${runId}`);
    });
    await noHorizontalScroll(page);
    await page.screenshot({ path: path.join(shots, "queue.png"), fullPage: true });
    noPageErrors(errors);
  } catch (error) {
    await page.screenshot({ path: path.join(shots, "failure.png"), fullPage: true }).catch(() => undefined);
    if (errors.length > 0) log(`browser errors:\n  ${errors.slice(-20).join("\n  ")}`);
    throw error;
  } finally {
    await browser.close();
  }
}

runCheck("e2e/queue.mjs", main);
