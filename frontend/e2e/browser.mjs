// @ts-check
/** What the browser checks share: environment, Chromium launch, login, and the exit protocol. */
import { mkdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

export class CheckFailed extends Error {}

/** @param {string} name */
export function required(name) {
  const value = process.env[name];
  if (!value) throw new CheckFailed(`environment variable ${name} is required`);
  return value;
}

/** @param {string} message */
export function log(message) {
  process.stdout.write(`[e2e ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

/** The screenshot folder (BARREL_SCREENSHOT_DIR, else e2e/screenshots), created. */
export function screenshotDir() {
  const shots = path.resolve(
    process.env.BARREL_SCREENSHOT_DIR || path.join(path.dirname(fileURLToPath(import.meta.url)), "screenshots"),
  );
  mkdirSync(shots, { recursive: true });
  return shots;
}

// Without the background-networking flags Chromium keeps dialling out, which this network refuses.
const LAUNCH_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/**
 * A script error on the page (a chart that threw, say) fails the check even when everything
 * it looked for showed up: a person would see a broken chart.
 * @param {string[]} errors what openBrowser collected
 */
export function noPageErrors(errors) {
  const thrown = errors.filter((e) => e.startsWith("page error:"));
  if (thrown.length > 0) throw new CheckFailed(`the page threw: ${thrown.slice(0, 5).join("; ")}`);
}

/**
 * The page fits its window: nothing wider than the viewport (a table that overflows it, say).
 * @param {import("playwright-core").Page} page
 */
export async function noHorizontalScroll(page) {
  const { scroll, client, culprit } = await page.evaluate(() => {
    const width = document.documentElement.clientWidth;
    // The outermost element that reaches past the window: what to fix.
    let culprit = "";
    for (const el of document.querySelectorAll("body *")) {
      if (el.getBoundingClientRect().right > width + 1) {
        const id = el.closest("[data-testid]")?.getAttribute("data-testid");
        const classes = typeof el.className === "string" && el.className ? `.${el.className.split(" ").join(".")}` : "";
        culprit = `${el.tagName.toLowerCase()}${classes}${id ? ` in [data-testid=${id}]` : ""}`;
        break;
      }
    }
    return { scroll: document.documentElement.scrollWidth, client: width, culprit };
  });
  if (scroll > client) {
    throw new CheckFailed(`the page is ${scroll} px wide in a ${client}-px window${culprit ? ` (first too wide: ${culprit})` : ""}`);
  }
}

/** Headless Debian Chromium with one page; browser errors are collected for the failure report. */
export async function openBrowser() {
  const browser = await chromium.launch({
    executablePath: process.env.BARREL_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: LAUNCH_ARGS,
  });
  /** @type {string[]} */
  const errors = [];
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const page = await context.newPage();
  page.on("pageerror", (error) => errors.push(`page error: ${error.message}`));
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(`console: ${message.text()}`);
  });
  return { browser, page, errors };
}

/**
 * Log in through the form and wait for the runs table.
 * @param {import("playwright-core").Page} page
 * @param {string} base
 * @param {string} user
 * @param {string} password
 */
export async function login(page, base, user, password) {
  log(`open ${base}/login`);
  await page.goto(`${base}/login`, { waitUntil: "domcontentloaded" });
  await page.locator('input[name="username"]').fill(user);
  await page.locator('input[name="password"]').fill(password);
  await page.locator('button[type="submit"]').click();
  const outcome = await Promise.race([
    page.locator('[data-testid="runs-table"]').waitFor({ timeout: 30_000 }).then(() => "ok"),
    page.locator(".login .error-box").waitFor({ timeout: 30_000 }).then(() => "error"),
  ]).catch(() => "timeout");
  if (outcome === "error") {
    const text = await page.locator(".login .error-box").innerText();
    throw new CheckFailed(`login refused: ${text.trim()}`);
  }
  if (outcome === "timeout") throw new CheckFailed(`no runs table 30 s after logging in (at ${page.url()})`);
  log("logged in");
}

/**
 * Run a check: exit 0 on success; print the reason and exit 1 on failure; give up after 5 min.
 * @param {string} name
 * @param {() => Promise<void>} main
 */
export function runCheck(name, main) {
  const overall = setTimeout(() => {
    process.stderr.write(`FAIL: ${name} exceeded 5 minutes\n`);
    process.exit(1);
  }, 300_000);
  overall.unref();
  main().then(
    () => {
      log("OK");
      process.exit(0);
    },
    (error) => {
      const reason =
        error instanceof CheckFailed ? error.message : error instanceof Error ? error.stack ?? error.message : String(error);
      process.stderr.write(`FAIL: ${reason}\n`);
      process.exit(1);
    },
  );
}
