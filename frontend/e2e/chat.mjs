#!/usr/bin/env node
// @ts-check
/**
 * Browser check of a chat with a checkpoint.
 *
 *   BARREL_URL=http://127.0.0.1:8000 BARREL_USER=demo BARREL_PASSWORD=... \
 *   BARREL_CHECKPOINT_ID=3 BARREL_SCREENSHOT_DIR=/tmp/shots node e2e/chat.mjs
 *
 * Arrives at /chat?checkpoint=ID as from a run's page, starts a chat, sends a message and waits
 * (up to BARREL_REPLY_TIMEOUT_S, default 240: a cold server first starts on Ray and loads the
 * model) for the reply with its time to first token and tokens/s. Screenshots chat-starting.png
 * (when the reply waits for its server) and chat.png.
 */
import path from "node:path";

import { CheckFailed, log, login, noHorizontalScroll, noPageErrors, openBrowser, required, runCheck, screenshotDir } from "./browser.mjs";

async function main() {
  const base = required("BARREL_URL").replace(/\/+$/, "");
  const checkpoint = required("BARREL_CHECKPOINT_ID");
  const replyTimeoutMs = 1000 * Number(process.env.BARREL_REPLY_TIMEOUT_S || 240);
  const shots = screenshotDir();
  const { browser, page, errors } = await openBrowser();
  try {
    await login(page, base, required("BARREL_USER"), required("BARREL_PASSWORD"));
    await page.goto(`${base}/chat?checkpoint=${checkpoint}`, { waitUntil: "domcontentloaded" });
    await page.locator('[data-testid="start-chat"]').click();
    await page.locator('[data-testid="chat-label"]').waitFor({ timeout: 15_000 }).catch(() => {
      throw new CheckFailed(`starting a chat did not open it (at ${page.url()})`);
    });
    log(`chat open at ${page.url()}`);
    await page.locator('[data-testid="composer"]').fill("1+2=");
    await page.locator('[data-testid="send"]').click();
    const reply = page.locator('.chat-message.assistant').last();
    await reply.waitFor({ timeout: 15_000 }).catch(() => {
      throw new CheckFailed("the sent message shows no reply on its way");
    });
    const starting = reply.locator('[data-testid="starting"]');
    if (await starting.isVisible()) {
      log(`waiting: ${(await starting.innerText()).trim()}`);
      await page.screenshot({ path: path.join(shots, "chat-starting.png") });
    }
    const figures = reply.locator('[data-testid="figures"]');
    await figures.waitFor({ timeout: replyTimeoutMs }).catch(async () => {
      throw new CheckFailed(`no finished reply after ${replyTimeoutMs / 1000} s: ${(await reply.innerText()).trim()}`);
    });
    const text = (await figures.innerText()).trim();
    log(`reply figures: ${text}`);
    if (!/^TTFT .+ · .+ tokens\/s · \d+ tokens?$/.test(text)) throw new CheckFailed(`the figures read ${JSON.stringify(text)}`);
    await noHorizontalScroll(page);
    await page.screenshot({ path: path.join(shots, "chat.png") });
    noPageErrors(errors);
  } catch (error) {
    await page.screenshot({ path: path.join(shots, "failure.png"), fullPage: true }).catch(() => undefined);
    if (errors.length > 0) log(`browser errors:\n  ${errors.slice(-20).join("\n  ")}`);
    throw error;
  } finally {
    await browser.close();
  }
}

runCheck("e2e/chat.mjs", main);
