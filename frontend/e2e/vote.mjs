#!/usr/bin/env node
// @ts-check
/**
 * Browser check of blind voting: several people, one after another, each in a fresh browser
 * context, vote on an OPEN eval with the keyboard; then the eval's page ranks the candidates.
 *
 *   BARREL_URL=http://127.0.0.1:8000 BARREL_VOTERS=alice:pw,bob:pw,carol:pw BARREL_EVAL_ID=3 \
 *   BARREL_LABELS=tiny-one,tiny-two BARREL_SCREENSHOT_DIR=/tmp/shots node e2e/vote.mjs
 *
 * For each voter: before the vote no candidate label is anywhere in the page's HTML (blindness);
 * keys 1/2/3 pick A, B or tie and Enter submits; after the vote the reveal names the two
 * candidates (screenshots vote-before.png and vote-after.png of the first voter). Then, as the
 * last voter, the eval's page shows every candidate ranked with a 95 % interval (ranking.png).
 */
import path from "node:path";

import { CheckFailed, log, login, noHorizontalScroll, noPageErrors, openBrowser, required, runCheck, screenshotDir } from "./browser.mjs";

const KEYS = ["1", "2", "3"];

async function main() {
  const base = required("BARREL_URL").replace(/\/+$/, "");
  const evalId = required("BARREL_EVAL_ID");
  const labels = required("BARREL_LABELS").split(",");
  const voters = required("BARREL_VOTERS")
    .split(",")
    .map((pair) => pair.split(":"));
  const shots = screenshotDir();
  const { browser, page: first, errors } = await openBrowser();
  try {
    let page = first;
    for (const [n, [user, password]] of voters.entries()) {
      if (n > 0) {
        await page.context().close();
        const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
        page = await context.newPage();
        page.on("pageerror", (error) => errors.push(`page error: ${error.message}`));
      }
      await login(page, base, user ?? "", password ?? "");
      await page.goto(`${base}/evals/${evalId}/vote`, { waitUntil: "domcontentloaded" });
      await page.locator('[data-testid="prompt"]').waitFor({ timeout: 30_000 }).catch(() => {
        throw new CheckFailed(`${user}: no battle on the vote page`);
      });
      await page.locator('[data-testid="response-a"]').waitFor();
      const before = await page.content();
      const named = labels.filter((label) => before.includes(label));
      if (named.length > 0) throw new CheckFailed(`${user}: the page names ${named.join(", ")} before the vote`);
      if (n === 0) await page.screenshot({ path: path.join(shots, "vote-before.png") });

      const key = KEYS[n % KEYS.length] ?? "1";
      await page.keyboard.press(key);
      await page.keyboard.press("Enter");
      const reveal = page.locator('[data-testid="reveal"]');
      await reveal.waitFor({ timeout: 30_000 }).catch(() => {
        throw new CheckFailed(`${user}: no reveal after pressing ${key} and Enter`);
      });
      const shown = [await page.locator('[data-testid="reveal-a"]').innerText(), await page.locator('[data-testid="reveal-b"]').innerText()];
      if (!shown.every((label) => labels.includes(label)) || shown[0] === shown[1]) {
        throw new CheckFailed(`${user}: the reveal names ${JSON.stringify(shown)}, not two of ${labels.join(", ")}`);
      }
      log(`${user} voted ${key}: A was ${shown[0]}, B was ${shown[1]}`);
      if (n === 0) await page.screenshot({ path: path.join(shots, "vote-after.png") });
    }

    await page.goto(`${base}/evals/${evalId}`, { waitUntil: "domcontentloaded" });
    const table = page.locator('[data-testid="ranking-table"]');
    await table.waitFor({ timeout: 30_000 }).catch(() => {
      throw new CheckFailed("no ranking table on the eval's page");
    });
    for (const label of labels) {
      const row = page.locator(`[data-testid="ranking-row-${label}"]`);
      await row.waitFor({ timeout: 30_000 }).catch(() => {
        throw new CheckFailed(`the ranking has no row for ${label}`);
      });
      const text = await row.innerText();
      if (!/\d+ \[\d+, \d+\]/.test(text)) throw new CheckFailed(`${label}'s row shows no score with an interval: ${text}`);
    }
    await noHorizontalScroll(page);
    await page.screenshot({ path: path.join(shots, "ranking.png"), fullPage: true });
    noPageErrors(errors);
  } finally {
    await browser.close();
  }
}

runCheck("vote", main);
