#!/usr/bin/env node
// @ts-check
/**
 * Browser check of a run's diagnostics and alerts, and the team's failure triage, in a 1280-px
 * window.
 *
 *   BARREL_URL=... BARREL_USER=... BARREL_PASSWORD=... BARREL_RUN_ID=12 BARREL_TEAM_ID=1 \
 *   BARREL_ALERT_KIND=nan_inf BARREL_SCREENSHOT_DIR=/tmp/shots node e2e/diagnostics.mjs
 *
 * BARREL_RUN_ID must be a run with a diagnosis and an open alert of BARREL_ALERT_KIND; the team
 * must have a filed failure. Checks the run page's Diagnostics panel names the bounding stave
 * (screenshot diagnostics.png), its Alerts panel shows the alert and acknowledging it works
 * (alert.png), the team's alert feed lists it (team-alerts.png) and its run link marks the
 * alert's step on the run page (run-step.png), and the team's failures page lists a signature
 * whose page shows its traceback (triage.png, failure.png).
 */
import path from "node:path";

import { CheckFailed, log, login, noHorizontalScroll, noPageErrors, openBrowser, required, runCheck, screenshotDir } from "./browser.mjs";

async function main() {
  const base = required("BARREL_URL").replace(/\/+$/, "");
  const runId = required("BARREL_RUN_ID");
  const teamId = required("BARREL_TEAM_ID");
  const kind = required("BARREL_ALERT_KIND");
  const shots = screenshotDir();
  const { browser, page, errors } = await openBrowser();
  try {
    await page.setViewportSize({ width: 1280, height: 900 });
    await login(page, base, required("BARREL_USER"), required("BARREL_PASSWORD"));

    await page.goto(`${base}/runs/${runId}`, { waitUntil: "domcontentloaded" });
    const diagnostics = page.locator('[data-testid="diagnostics"]');
    await diagnostics.locator('[data-testid="bounding"]').waitFor({ timeout: 30_000 }).catch(() => {
      throw new CheckFailed("the Diagnostics panel names no bounding stave");
    });
    await diagnostics.scrollIntoViewIfNeeded();
    await noHorizontalScroll(page);
    await page.screenshot({ path: path.join(shots, "diagnostics.png"), fullPage: true });

    const alert = page.locator('[data-testid="alert"]').filter({ hasText: kind.replaceAll("_", " ") }).first();
    await alert.waitFor({ timeout: 30_000 }).catch(() => {
      throw new CheckFailed(`the Alerts panel shows no ${kind} alert`);
    });
    log(`alert: ${(await alert.innerText()).replace(/\s+/g, " ").trim()}`);
    await alert.scrollIntoViewIfNeeded();
    await page.screenshot({ path: path.join(shots, "alert.png") });
    await alert.getByRole("button", { name: /acknowledge/i }).click();
    await alert.getByText(/acknowledged by/).waitFor({ timeout: 15_000 }).catch(() => {
      throw new CheckFailed("acknowledging the alert did not show who acknowledged it");
    });

    await page.goto(`${base}/teams/${teamId}/alerts`, { waitUntil: "domcontentloaded" });
    const feedRow = page.locator(`[data-testid="alert-row"][data-kind="${kind}"]`).first();
    await feedRow.waitFor({ timeout: 30_000 }).catch(() => {
      throw new CheckFailed(`the team's alert feed lists no ${kind} alert`);
    });
    log(`team alert: ${(await feedRow.innerText()).replace(/\s+/g, " ").trim()}`);
    await noHorizontalScroll(page);
    await page.screenshot({ path: path.join(shots, "team-alerts.png"), fullPage: true });
    // The row's run link goes to the run page with the alert's step marked on its charts.
    await feedRow.getByRole("link").first().click();
    await page.locator('[data-testid="step-focus"]').waitFor({ timeout: 30_000 }).catch(() => {
      throw new CheckFailed("the alert's run link does not mark its step on the run page");
    });
    await noHorizontalScroll(page);
    await page.screenshot({ path: path.join(shots, "run-step.png") });

    await page.goto(`${base}/teams/${teamId}/failures`, { waitUntil: "domcontentloaded" });
    const row = page.locator('[data-testid="signatures-table"] tbody tr').first();
    await row.waitFor({ timeout: 30_000 }).catch(() => {
      throw new CheckFailed("the team's failures page lists no signature");
    });
    await noHorizontalScroll(page);
    await page.screenshot({ path: path.join(shots, "triage.png"), fullPage: true });
    await row.locator("a").first().click();
    await page.locator('[data-testid="traceback"]').waitFor({ timeout: 15_000 }).catch(() => {
      throw new CheckFailed("the failure's page shows no traceback");
    });
    await page.screenshot({ path: path.join(shots, "failure.png"), fullPage: true });
    noPageErrors(errors);
  } catch (error) {
    await page.screenshot({ path: path.join(shots, "diagnostics-failure.png"), fullPage: true }).catch(() => undefined);
    if (errors.length > 0) log(`browser errors:\n  ${errors.slice(-20).join("\n  ")}`);
    throw error;
  } finally {
    await browser.close();
  }
}

runCheck("e2e/diagnostics.mjs", main);
