#!/usr/bin/env node
// @ts-check
/**
 * Browser check of an agent GRPO run: its rollout samples turn by turn, its tool metrics, and
 * the isolation its sandboxes ran in.
 *
 *   BARREL_URL=http://127.0.0.1:8000 BARREL_USER=demo BARREL_PASSWORD=... \
 *   BARREL_RUN_ID=12 BARREL_SCREENSHOT_DIR=/tmp/shots node e2e/agent.mjs
 *
 * BARREL_RUN_ID must be a finished GRPO run with `agent.tools` whose kept samples made a tool
 * call. Opens the run page; checks that the sample browser shows some sample as its turns, with
 * the tool's reply labelled by tool, kind and time (screenshot agent-samples.png); that the
 * charts have an agent/ section beside the sandbox's; and that the attempts table names the
 * sandbox's isolation tier (screenshot agent-attempts.png).
 */
import path from "node:path";

import { CheckFailed, log, login, noPageErrors, openBrowser, required, runCheck, screenshotDir } from "./browser.mjs";

async function main() {
  const base = required("BARREL_URL").replace(/\/+$/, "");
  const runId = required("BARREL_RUN_ID");
  const shots = screenshotDir();
  const { browser, page, errors } = await openBrowser();
  try {
    await page.setViewportSize({ width: 1280, height: 900 });
    await login(page, base, required("BARREL_USER"), required("BARREL_PASSWORD"));
    await page.goto(`${base}/runs/${runId}`, { waitUntil: "domcontentloaded" });
    await page.locator('[data-testid="run-status"]').waitFor({ timeout: 15_000 });

    const panel = page.locator('[data-testid="samples"]');
    await panel.locator("ol.turns").first().waitFor({ timeout: 15_000 }).catch(() => {
      throw new CheckFailed("no sample is shown as its turns");
    });
    // A call that ran: its reply is labelled with the tool, what the call came to and its time.
    const ran = page.locator(".tag", { hasText: /^calc · ok · \d+ ms$/ });
    const turns = panel.locator("ol.turns", { has: ran }).first();
    await turns.waitFor({ timeout: 5_000 }).catch(() => {
      throw new CheckFailed("no sample's turns show a tool reply labelled 'calc · ok · <n> ms'");
    });
    const label = (await turns.locator(".tag", { hasText: /^calc · ok/ }).first().innerText()).trim();
    const calls = await turns.locator("li.model-turn", { hasText: /^calc:/ }).count();
    if (calls === 0) throw new CheckFailed("the episode's model turns show no call");
    const model = (await turns.locator("li.model-turn", { hasText: /^calc:/ }).first().innerText()).trim();
    log(`turns of a sample: ${await turns.locator("li").count()} (call "${model}", reply labelled "${label}")`);
    await turns.scrollIntoViewIfNeeded();
    await page.screenshot({ path: path.join(shots, "agent-samples.png") });

    const agent = page.locator('[data-testid="fold-agent"]');
    await agent.waitFor({ timeout: 15_000 }).catch(() => {
      throw new CheckFailed("the charts have no agent section");
    });

    const attempts = page.locator('[data-testid="attempts"]');
    await attempts.locator("summary").click();
    const line = attempts.locator('tbody tr [data-testid="attempt-sandbox"]').first();
    await line.waitFor({ timeout: 5_000 }).catch(() => {
      throw new CheckFailed("the attempts table names no sandbox");
    });
    const tier = (await line.innerText()).trim();
    if (tier !== "sandbox: bubblewrap") throw new CheckFailed(`the attempt's sandbox reads "${tier}", not bubblewrap`);
    log(`attempt sandbox: ${tier}`);
    const box = await attempts.locator("table").boundingBox();
    if (!box || box.x + box.width > 1280) {
      throw new CheckFailed(`the attempts table reaches past 1280 px: ${JSON.stringify(box)}`);
    }
    await attempts.scrollIntoViewIfNeeded();
    await page.screenshot({ path: path.join(shots, "agent-attempts.png") });
    noPageErrors(errors);
  } finally {
    await browser.close();
  }
}

runCheck("e2e/agent.mjs", main);
