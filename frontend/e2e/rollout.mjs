#!/usr/bin/env node
// @ts-check
/**
 * Browser check of a GRPO run's rollout samples, checkpoints and resume button.
 *
 *   BARREL_URL=http://127.0.0.1:8000 BARREL_USER=demo BARREL_PASSWORD=... \
 *   BARREL_RUN_ID=12 BARREL_SCREENSHOT_DIR=/tmp/shots node e2e/rollout.mjs
 *
 * BARREL_RUN_ID must be a FAILED run that kept samples and registered checkpoints. Opens the
 * run page, checks that the samples table and the checkpoint registry show them (screenshot
 * rollout.png), clicks "Resume", accepts the confirmation and waits until the page shows the
 * run queued or running again as a second attempt (screenshot resumed.png); then checks that
 * the attempts table of both attempts fits a 1280-px window (screenshot attempts-1280.png).
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
  const shots = screenshotDir();
  const { browser, page, errors } = await openBrowser();
  try {
    await login(page, base, required("BARREL_USER"), required("BARREL_PASSWORD"));
    await page.goto(`${base}/runs/${runId}`, { waitUntil: "domcontentloaded" });
    const status = page.locator('[data-testid="run-status"]');
    await status.waitFor({ timeout: 15_000 });
    const before = (await status.innerText()).trim();
    if (before !== "FAILED") throw new CheckFailed(`run ${runId} shows ${before}; this check needs a FAILED run`);

    const sampleRows = page.locator('[data-testid="samples"] tbody tr');
    await sampleRows.first().waitFor({ timeout: 15_000 }).catch(() => {
      throw new CheckFailed("no rollout samples are shown");
    });
    const firstSample = (await sampleRows.first().innerText()).replace(/\s+/g, " ").trim();
    log(`samples shown: ${await sampleRows.count()} (first: ${firstSample})`);
    const checkpointRows = page.locator('[data-testid="checkpoints"] tbody tr');
    await checkpointRows.first().waitFor({ timeout: 15_000 }).catch(() => {
      throw new CheckFailed("no checkpoints are shown");
    });
    log(`checkpoints shown: ${await checkpointRows.count()}`);
    await page.screenshot({ path: path.join(shots, "rollout.png"), fullPage: true });

    const resume = page.locator('[data-testid="resume-run"]');
    const label = (await resume.innerText()).trim();
    page.once("dialog", (dialog) => void dialog.accept());
    await resume.click();
    log(`clicked "${label}"`);
    await page
      .waitForFunction(
        () => {
          const text = document.querySelector('[data-testid="run-status"]')?.textContent?.trim();
          return text !== undefined && text !== "FAILED";
        },
        undefined,
        { timeout: 15_000 },
      )
      .catch(() => {
        throw new CheckFailed("the run still shows FAILED 15 s after resuming");
      });
    log(`run ${runId} now ${(await status.innerText()).trim()}`);
    await page.screenshot({ path: path.join(shots, "resumed.png"), fullPage: true });

    // Two attempts, the first with its failure reason and code version, in a 1280-px window.
    await page.setViewportSize({ width: 1280, height: 900 });
    const attempts = page.locator('[data-testid="attempts"]');
    const attemptRows = attempts.locator("tbody tr");
    await page
      .waitForFunction(() => document.querySelectorAll('[data-testid="attempts"] tbody tr').length >= 2, undefined, {
        timeout: 15_000,
      })
      .catch(() => {
        throw new CheckFailed("the attempts table does not show the second attempt");
      });
    if ((await attempts.getAttribute("open")) === null) await attempts.locator("summary").click();
    await noHorizontalScroll(page);
    const box = await attempts.locator("table").boundingBox();
    if (!box || box.x + box.width > 1280) {
      throw new CheckFailed(`the attempts table reaches past 1280 px: ${JSON.stringify(box)}`);
    }
    log(`attempts shown: ${await attemptRows.count()}, table ${Math.round(box.width)} px wide`);
    await attempts.screenshot({ path: path.join(shots, "attempts-1280.png") });
    noPageErrors(errors);
  } catch (error) {
    await page.screenshot({ path: path.join(shots, "failure.png"), fullPage: true }).catch(() => undefined);
    if (errors.length > 0) log(`browser errors:\n  ${errors.slice(-20).join("\n  ")}`);
    throw error;
  } finally {
    await browser.close();
  }
}

runCheck("e2e/rollout.mjs", main);
