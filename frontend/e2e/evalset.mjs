#!/usr/bin/env node
// @ts-check
/**
 * Browser check of creating an eval set from a JSONL file, as a member.
 *
 *   BARREL_URL=http://127.0.0.1:8000 BARREL_USER=alice BARREL_PASSWORD=... \
 *   BARREL_SCREENSHOT_DIR=/tmp/shots node e2e/evalset.mjs
 *
 * From the evals list to Eval sets to New eval set; fills in name and guidelines, loads a JSONL
 * file whose line 3 is bad and submits: the page must name line 3 beside its text and keep the
 * form (screenshot evalset-bad-line.png). Loads the fixed file and submits: the set's page
 * shows the four prompts with their references and tags and the guidelines (evalset.png).
 * BARREL_EVALSET_NAME names the set (default: a unique one), BARREL_TEAM picks its team by slug
 * (default: the form's choice); prints "EVAL SET <id>" at the end.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
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

const GOOD = [
  { prompt: "What is 17 + 25?", reference: "42", tags: ["sum", "easy"] },
  { prompt: "Write a haiku about gradient descent.", tags: ["creative"] },
  { prompt: "Is 91 a prime number? Answer yes or no, then explain in one sentence.", reference: "No: 91 = 7 × 13." },
  { prompt: "Name the capital of Australia.", reference: "Canberra", tags: ["facts"] },
];

/** The same file with line 3 misspelling its field: the server refuses it, and with it the set. */
function badFile() {
  const lines = GOOD.map((p) => JSON.stringify(p));
  lines[2] = JSON.stringify({ promt: GOOD[2]?.prompt, reference: GOOD[2]?.reference });
  return lines.join("\n") + "\n";
}

function goodFile() {
  return GOOD.map((p) => JSON.stringify(p)).join("\n") + "\n";
}

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

async function main() {
  const base = required("BARREL_URL").replace(/\/+$/, "");
  const name = process.env.BARREL_EVALSET_NAME || `arith-${Date.now().toString(36)}`;
  const shots = screenshotDir();
  const files = mkdtempSync(path.join(tmpdir(), "barrel-evalset-"));
  const bad = path.join(files, "prompts.jsonl");
  const good = path.join(files, "prompts-fixed.jsonl");
  writeFileSync(bad, badFile());
  writeFileSync(good, goodFile());

  const { browser, page, errors } = await openBrowser();
  try {
    await login(page, base, required("BARREL_USER"), required("BARREL_PASSWORD"));
    await page.locator('a[href="/evals"]').first().click();
    await (await shown(page, "eval-sets-link", "the evals page has no Eval sets entry")).click();
    await (await shown(page, "new-eval-set", "the eval sets page offers a member no New eval set")).click();

    await (await shown(page, "set-name", "no eval set form")).fill(name);
    if (process.env.BARREL_TEAM) await page.locator('[data-testid="set-team"]').selectOption(process.env.BARREL_TEAM);
    await page.locator('[data-testid="set-description"]').fill("Sums, primes and facts with short reference answers.");
    await page
      .locator('[data-testid="set-guidelines"]')
      .fill("Prefer the correct answer. When both are correct, prefer the shorter one.");
    await page.locator('[data-testid="source-jsonl"]').check();
    await page.locator('[data-testid="jsonl-file"]').setInputFiles(bad);
    const loaded = await shown(page, "jsonl-file-name", "the file's name and prompt count are not shown after loading it");
    log(`loaded: ${(await loaded.innerText()).trim()}`);
    await page.locator('[data-testid="create-set"]').click();

    const line3 = await shown(page, "jsonl-error-3", "line 3's error is not shown after the server refused it");
    const said = (await line3.innerText()).replace(/\s+/g, " ").trim();
    log(`line 3: ${said}`);
    if (!said.includes("line 3: prompt: required")) throw new CheckFailed(`line 3's error says ${JSON.stringify(said)}`);
    if (!said.includes('"promt"')) throw new CheckFailed("line 3's error does not quote the line");
    if ((await page.locator('[data-testid^="jsonl-error-"]').count()) !== 1) {
      throw new CheckFailed("lines other than 3 are marked bad");
    }
    if ((await page.locator('[data-testid="set-name"]').inputValue()) !== name) throw new CheckFailed("the name was lost");
    if (!(await page.locator('[data-testid="jsonl-text"]').inputValue()).includes('"promt"')) {
      throw new CheckFailed("the loaded JSONL was lost");
    }
    await noHorizontalScroll(page);
    await page.screenshot({ path: path.join(shots, "evalset-bad-line.png"), fullPage: true });

    await page.locator('[data-testid="jsonl-file"]').setInputFiles(good);
    await page.locator('[data-testid="create-set"]').click();
    await page.waitForURL(/\/eval-sets\/\d+$/, { timeout: 15_000 }).catch(() => {
      throw new CheckFailed(`no eval set page after sending the fixed file (at ${page.url()})`);
    });
    const setId = page.url().split("/").pop();
    await shown(page, "prompts-table", "the new set's page shows no prompts");
    const rows = page.locator('[data-testid="prompts-table"] tbody tr');
    if ((await rows.count()) !== GOOD.length) throw new CheckFailed(`the set shows ${await rows.count()} prompts`);
    const first = (await rows.first().innerText()).replace(/\s+/g, " ");
    if (!first.includes("What is 17 + 25?") || !first.includes("42") || !first.includes("easy")) {
      throw new CheckFailed(`the first prompt reads ${JSON.stringify(first)}`);
    }
    const guidelines = await (await shown(page, "guidelines", "the guidelines are not shown")).innerText();
    if (!guidelines.includes("Prefer the correct answer")) throw new CheckFailed(`guidelines: ${guidelines}`);
    await noHorizontalScroll(page);
    await page.screenshot({ path: path.join(shots, "evalset.png"), fullPage: true });

    await page.locator('a[href="/eval-sets"]').first().click();
    await shown(page, `eval-set-row-${setId}`, "the new set is not in the list");
    await page.screenshot({ path: path.join(shots, "evalsets.png") });
    noPageErrors(errors);
    process.stdout.write(`EVAL SET ${setId}\n`);
  } catch (error) {
    await page.screenshot({ path: path.join(shots, "failure.png"), fullPage: true }).catch(() => undefined);
    if (errors.length > 0) log(`browser errors:\n  ${errors.slice(-20).join("\n  ")}`);
    throw error;
  } finally {
    await browser.close();
  }
}

runCheck("eval set by JSONL upload", main);
