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
 * rollout.png), filters the samples to one step and opens a sample's prompt across steps and
 * weight versions (screenshot samples-browser.png), clicks "Resume", accepts the confirmation
 * and waits until the page shows the run queued or running again as a second attempt
 * (screenshot resumed.png); then checks that the attempts table of both attempts fits a
 * 1280-px window (screenshot attempts-1280.png).
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
    await browseSamples(page, shots);

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

/**
 * The sample browser: filter the samples to the first row's step (the URL keeps the view),
 * then open that sample's prompt across steps and weight versions, oldest step first
 * (screenshot samples-browser.png), all in a 1280-px window; back to all samples after.
 * @param {import("playwright-core").Page} page
 * @param {string} shots
 */
async function browseSamples(page, shots) {
  const viewport = page.viewportSize();
  await page.setViewportSize({ width: 1280, height: 900 });
  const panel = page.locator('[data-testid="samples"]');
  const rows = panel.locator("tbody tr[data-sample]");
  const step = (await rows.first().locator("td").first().innerText()).trim();
  await panel.locator('[data-testid="samples-min_step"]').fill(step);
  await panel.locator('[data-testid="samples-max_step"]').fill(step);
  await panel.locator('[data-testid="samples-max_step"]').press("Enter");
  await page
    .waitForFunction(
      (wanted) => {
        const url = new URL(window.location.href);
        const cells = [...document.querySelectorAll('[data-testid="samples"] tbody tr[data-sample] td:first-child')];
        return (
          url.searchParams.get("samples.min_step") === wanted &&
          cells.length > 0 &&
          cells.every((cell) => cell.textContent?.trim() === wanted) &&
          document.querySelector('[data-testid="samples-page"]') !== null
        );
      },
      step,
      { timeout: 15_000 },
    )
    .catch(() => {
      throw new CheckFailed(`filtering the samples to step ${step} does not show only that step`);
    });
  log(`samples of step ${step}: ${await rows.count()} (${(await panel.locator('[data-testid="samples-page"]').innerText()).trim()})`);

  const opened = await rows.first().getAttribute("data-sample");
  await rows.first().locator('[data-testid="samples-across"]').click();
  const cards = panel.locator('[data-testid="version-card"]');
  await cards.first().waitFor({ timeout: 15_000 }).catch(() => {
    throw new CheckFailed(`"Across versions" of sample ${opened} shows no samples`);
  });
  const steps = (await cards.locator(".version-head strong").allInnerTexts()).map((t) => Number(t.replace("step ", "")));
  if (steps.some((s, i) => i > 0 && s < (steps[i - 1] ?? s))) {
    throw new CheckFailed(`the prompt's samples are not oldest step first: ${steps.join(", ")}`);
  }
  if ((await panel.locator(".version-card.opened").count()) !== 1) {
    throw new CheckFailed(`the sample the view was opened from (${opened}) is not marked among its prompt's samples`);
  }
  if (new URL(page.url()).searchParams.get("samples.prompt") !== opened) {
    throw new CheckFailed(`the URL does not name the prompt's sample: ${page.url()}`);
  }
  log(`same prompt across versions: ${steps.length} samples (steps ${steps.join(", ")})`);
  await noHorizontalScroll(page);
  await panel.screenshot({ path: path.join(shots, "samples-browser.png") });

  await panel.locator('[data-testid="samples-back"]').click();
  await panel.locator('[data-testid="samples-clear"]').click();
  await page
    .waitForFunction(() => ![...new URL(window.location.href).searchParams.keys()].some((k) => k.startsWith("samples.")))
    .catch(() => {
      throw new CheckFailed(`"Clear filters" leaves the URL at ${page.url()}`);
    });
  await rows.first().waitFor({ timeout: 15_000 });
  if (viewport) await page.setViewportSize(viewport);
}

runCheck("e2e/rollout.mjs", main);
