#!/usr/bin/env node
// @ts-check
/**
 * Browser check of a command run submitted from the dashboard, as `barrel submit --command` does
 * it, and of the team secrets it gets its credentials from.
 *
 *   BARREL_URL=... BARREL_USER=alice BARREL_PASSWORD=... BARREL_ZIP=/tmp/trainer.zip \
 *   BARREL_NOT_ZIP=/tmp/notes.txt BARREL_TOO_LARGE=/tmp/huge.zip BARREL_SECRET_VALUE=... \
 *   BARREL_SCREENSHOT_DIR=/tmp/shots node e2e/command_submit.mjs
 *
 * 1. Team (top bar) → the team's settings: set secret E2E_SECRET through the password input; it
 *    is listed by name, its value nowhere on the page (screenshot secrets.png).
 * 2. New run → recipe command. A file that is no zip, then one over the server's limit: each
 *    refusal is shown beside the field (screenshot command-too-large.png). The zip: uploaded with
 *    its progress, its hash fills working_dir.
 * 3. A command line with an unclosed quote and a pip line that is no requirement: the server's
 *    400s are shown beside each (screenshot command-refused.png, 1280 px).
 * 4. Fixed (env rows LR and WANT_SHA256, pip emptied): submitted, the run's page opens and the
 *    run succeeds there (screenshot command-run.png). Prints "RUN <id>".
 *    Clone with edits: the form holds its command line, env LR edited, the diff lists that one
 *    change (screenshot command-clone.png); submitted. Prints "CLONE <id>".
 * 5. The settings again: E2E_SECRET deleted after confirming (screenshot secrets-delete.png).
 * BARREL_PROJECT (default lab/byo-web) is the project, made if missing.
 */
import { createHash } from "node:crypto";
import path from "node:path";

import { CheckFailed, log, login, noHorizontalScroll, noPageErrors, openBrowser, required, runCheck, screenshotDir } from "./browser.mjs";

const REF = /^sha256:[0-9a-f]{64}$/;

/**
 * @param {import("playwright-core").Page} page
 * @param {string} testId
 * @param {string} what what a person would miss
 */
async function shown(page, testId, what, timeout = 15_000) {
  const locator = page.locator(`[data-testid="${testId}"]`);
  await locator.first().waitFor({ timeout }).catch(() => {
    throw new CheckFailed(`${what} (no [data-testid="${testId}"] at ${page.url()})`);
  });
  return locator.first();
}

/** @param {string} text */
function squash(text) {
  return text.replace(/\s+/g, " ").trim();
}

/**
 * @param {import("playwright-core").Page} page
 * @param {string} name
 */
async function screenshot(page, name) {
  await page.setViewportSize({ width: 1280, height: 900 });
  await noHorizontalScroll(page);
  await page.screenshot({ path: path.join(screenshotDir(), name), fullPage: true });
}

/**
 * Pick a file for the working directory; the outcome the page shows (done or error).
 * @param {import("playwright-core").Page} page
 * @param {string} file
 */
async function upload(page, file) {
  await page.locator('[data-testid="cfg-upload-working_dir"]').setInputFiles(file);
  const outcome = page.locator('[data-testid="cfg-upload-done-working_dir"], [data-testid="cfg-upload-error-working_dir"]');
  await outcome.first().waitFor({ timeout: 60_000 }).catch(() => {
    throw new CheckFailed(`no outcome shown 60 s after picking ${path.basename(file)}`);
  });
  return {
    ok: (await outcome.first().getAttribute("data-testid")) === "cfg-upload-done-working_dir",
    text: squash(await outcome.first().innerText()),
  };
}

async function main() {
  const base = required("BARREL_URL").replace(/\/+$/, "");
  const project = process.env.BARREL_PROJECT || "lab/byo-web";
  const secret = required("BARREL_SECRET_VALUE");
  const stamp = Date.now().toString(36);
  const { browser, page, errors } = await openBrowser();
  try {
    await login(page, base, required("BARREL_USER"), required("BARREL_PASSWORD"));

    // ---- 1. a team secret, set by an admin
    await (await shown(page, "nav-settings", "the top bar has no Team link")).click();
    await page.waitForURL(/\/teams\/\d+\/settings$/);
    await shown(page, "secret-form", "an admin's settings page has no form to set a secret");
    await page.locator('[data-testid="secret-name"]').fill("E2E_SECRET");
    await page.locator('[data-testid="secret-value"]').fill(secret);
    if ((await page.locator('[data-testid="secret-value"]').getAttribute("type")) !== "password") {
      throw new CheckFailed("the secret's value is typed into a visible input");
    }
    await page.locator('[data-testid="secret-set"]').click();
    await shown(page, "secrets-notice", "setting a secret says nothing");
    await page.locator('[data-testid="secret-row"][data-name="E2E_SECRET"]').waitFor({ timeout: 15_000 }).catch(() => {
      throw new CheckFailed("the secret set is not listed");
    });
    if ((await page.content()).includes(secret)) throw new CheckFailed("the secret's value is on the settings page");
    log("secret E2E_SECRET set and listed by name only");
    await screenshot(page, "secrets.png");

    // ---- 2. the command form, and its working directory
    await (await shown(page, "nav-new-run", "the top bar has no New run link")).click();
    await page.waitForURL("**/runs/new");
    await (await shown(page, "submit-recipe", "no submit form")).selectOption("command");
    await shown(page, "cfg-input-command", "the command recipe's form has no command line");
    await page.locator('[data-testid="submit-project"]').fill(project);
    await page.locator('[data-testid="submit-name"]').fill(`web-command-${stamp}`);

    const notZip = await upload(page, required("BARREL_NOT_ZIP"));
    log(`not a zip: ${notZip.text}`);
    if (notZip.ok || !notZip.text.includes("Not a usable working directory")) {
      throw new CheckFailed(`a file that is no zip reads ${JSON.stringify(notZip.text)}`);
    }
    const large = await upload(page, required("BARREL_TOO_LARGE"));
    log(`too large: ${large.text}`);
    if (large.ok || !large.text.includes("Too large")) throw new CheckFailed(`a zip over the limit reads ${JSON.stringify(large.text)}`);
    await screenshot(page, "command-too-large.png");
    const good = await upload(page, required("BARREL_ZIP"));
    log(`zip: ${good.text}`);
    if (!good.ok) throw new CheckFailed(`the zip was not uploaded: ${good.text}`);
    const ref = await page.locator('[data-testid="cfg-input-working_dir"]').inputValue();
    if (!REF.test(ref)) throw new CheckFailed(`working_dir reads ${JSON.stringify(ref)} after the upload`);

    // ---- 3. what only the server can refuse, shown beside each field
    await page.locator('[data-testid="cfg-input-command"]').fill("python 'train.py");
    await page.locator('[data-testid="cfg-input-pip"]').fill("trl >>> 1\n");
    await page.locator('[data-testid="cfg-input-env-name-0"]').fill("LR");
    await page.locator('[data-testid="cfg-input-env-value-0"]').fill("1e-6");
    await page.locator('[data-testid="cfg-input-env-add"]').click();
    await page.locator('[data-testid="cfg-input-env-name-1"]').fill("WANT_SHA256");
    await page.locator('[data-testid="cfg-input-env-value-1"]').fill(createHash("sha256").update(secret).digest("hex"));
    await page.locator('[data-testid="submit"]').click();
    const commandError = squash(await (await shown(page, "cfg-server-error-command", "the server's refusal of the command line is not beside it")).innerText());
    const pipError = squash(await (await shown(page, "cfg-server-error-pip", "the server's refusal of the pip line is not beside it")).innerText());
    log(`command refused: ${commandError}`);
    log(`pip refused: ${pipError}`);
    if (!commandError.includes("No closing quotation")) throw new CheckFailed(`the command is refused with ${commandError}`);
    await screenshot(page, "command-refused.png");

    // ---- 4. fixed: the run is made, runs, and its page says so
    await page.locator('[data-testid="cfg-input-command"]').fill("python train.py --name 'web run'");
    await page.locator('[data-testid="cfg-input-pip"]').fill("");
    const words = squash(await (await shown(page, "cfg-words-command", "the command's words are not shown")).innerText());
    log(`command: ${words}`);
    await screenshot(page, "command-form.png");
    await page.locator('[data-testid="submit"]').click();
    await page.waitForURL(/\/runs\/\d+$/, { timeout: 15_000 }).catch(async () => {
      const error = await page.locator('[data-testid="form-error"]').innerText().catch(() => "");
      throw new CheckFailed(`no run page after submitting the fixed form (at ${page.url()}) ${squash(error)}`);
    });
    const runId = new URL(page.url()).pathname.split("/").pop();
    console.log(`RUN ${runId}`);
    const status = await shown(page, "run-status", "the run's page shows no status");
    const deadline = Date.now() + 120_000;
    let said = "";
    while (Date.now() < deadline) {
      said = squash(await status.innerText()).toLowerCase();
      if (said.includes("succeeded") || said.includes("failed") || said.includes("cancelled")) break;
      await page.waitForTimeout(500);
    }
    log(`run ${runId}: ${said}`);
    if (!said.includes("succeeded")) throw new CheckFailed(`run ${runId} reads ${JSON.stringify(said)} on its page`);
    if ((await page.content()).includes(secret)) throw new CheckFailed("the secret's value is on the run's page");
    await screenshot(page, "command-run.png");

    // ---- 4b. cloned with an edit: the widgets hold the run's config, the diff names the edit
    await (await shown(page, "clone-run", "the run's page has no Clone with edits")).click();
    await page.waitForURL(/\/runs\/new\?from=\d+$/);
    const line = await (await shown(page, "cfg-input-command", "the clone's form has no command line")).inputValue();
    if (line !== "python train.py --name 'web run'") throw new CheckFailed(`the clone's command line reads ${JSON.stringify(line)}`);
    await shown(page, "clone-diff-empty", "an unedited clone of a command run lists changes");
    const first = await page.locator('[data-testid="cfg-input-env-name-0"]').inputValue();
    if (first !== "LR") throw new CheckFailed(`the clone's first env row is ${JSON.stringify(first)}, not LR`);
    await page.locator('[data-testid="cfg-input-env-value-0"]').fill("2e-6");
    const diff = squash(await (await shown(page, "diff-env.LR", "the clone's diff does not name env.LR")).innerText());
    log(`clone diff: ${diff}`);
    const diffs = await page.locator('[data-testid="clone-diff"] li').count();
    if (diffs !== 1) throw new CheckFailed(`the clone's diff lists ${diffs} changes, not 1`);
    await screenshot(page, "command-clone.png");
    await page.locator('[data-testid="submit"]').click();
    await page.waitForURL(/\/runs\/\d+$/, { timeout: 15_000 }).catch(async () => {
      const error = await page.locator('[data-testid="form-error"]').innerText().catch(() => "");
      throw new CheckFailed(`no run page after submitting the clone (at ${page.url()}) ${squash(error)}`);
    });
    console.log(`CLONE ${new URL(page.url()).pathname.split("/").pop()}`);

    // ---- 5. the secret deleted, after saying so
    await (await shown(page, "nav-settings", "the top bar has no Team link")).click();
    const row = page.locator('[data-testid="secret-row"][data-name="E2E_SECRET"]');
    await row.waitFor({ timeout: 15_000 });
    await row.locator('[data-testid="secret-delete"]').click();
    await row.locator('[data-testid="secret-delete-confirm"]').waitFor();
    await screenshot(page, "secrets-delete.png");
    await row.locator('[data-testid="secret-delete-confirm"]').click();
    await row.waitFor({ state: "detached", timeout: 15_000 }).catch(() => {
      throw new CheckFailed("the deleted secret is still listed");
    });
    log("secret E2E_SECRET deleted");
    noPageErrors(errors);
  } finally {
    await browser.close();
  }
}

runCheck("submit a command run from the browser", main);
