#!/usr/bin/env node
// @ts-check
/**
 * Browser check of submitting runs from the dashboard: New run from the top bar, recipe smoke.
 *
 *   BARREL_URL=http://127.0.0.1:8000 BARREL_USER=demo BARREL_PASSWORD=... \
 *   BARREL_PROJECT=lab/e2e BARREL_SCREENSHOT_DIR=/tmp/shots node e2e/submit.mjs
 *
 * 1. steps 0, out of the schema's range: the form says so beside the field and sends nothing
 *    (screenshot submit-error.png).
 * 2. A project in a team the user is not in, which only the server can refuse: its 404 is shown
 *    beside the project.
 * 3. Fixed: submitted, the run's page opens. Prints "RUN <id>".
 * 4. The form again, as a sweep: tasks_per_step "1, 2" and 3 seeds, "2 × 3 seeds = 6 runs" read
 *    before sending (screenshot submit-form.png, 1280 px wide); sent with an Idempotency-Key, the
 *    group's page opens. Prints "GROUP <id>".
 * BARREL_PROJECT (default lab/e2e) is the project, "team/project", made if missing.
 */
import path from "node:path";

import { CheckFailed, log, login, noHorizontalScroll, noPageErrors, openBrowser, required, runCheck, screenshotDir } from "./browser.mjs";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

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

/**
 * From the top bar's New run to the form, recipe smoke chosen.
 * @param {import("playwright-core").Page} page
 */
async function openForm(page) {
  await (await shown(page, "nav-new-run", "the top bar has no New run link")).click();
  await page.waitForURL("**/runs/new");
  const recipe = await shown(page, "submit-recipe", "no submit form (recipes not loaded?)");
  await recipe.selectOption("smoke");
  await shown(page, "cfg-input-steps", "smoke's form has no steps field");
}

/** @param {string} text */
function squash(text) {
  return text.replace(/\s+/g, " ").trim();
}

async function main() {
  const base = required("BARREL_URL").replace(/\/+$/, "");
  const project = process.env.BARREL_PROJECT || "lab/e2e";
  const stamp = Date.now().toString(36);
  const shots = screenshotDir();
  const { browser, page, errors } = await openBrowser();
  /** @type {{ path: string, headers: Record<string, string> }[]} */
  const posts = [];
  page.on("request", (request) => {
    const url = new URL(request.url());
    if (request.method() === "POST" && url.pathname.startsWith("/api/v1/")) {
      posts.push({ path: url.pathname, headers: request.headers() });
    }
  });
  const postsTo = (/** @type {string} */ p) => posts.filter((post) => post.path === p);

  try {
    await login(page, base, required("BARREL_USER"), required("BARREL_PASSWORD"));

    // ---- 1. out of range: refused beside the field, nothing sent
    await openForm(page);
    await page.locator('[data-testid="submit-project"]').fill(project);
    await page.locator('[data-testid="submit-name"]').fill(`submit-${stamp}`);
    await page.locator('[data-testid="submit-tags"]').fill("e2e, browser-submit");
    await page.locator('[data-testid="cfg-input-steps"]').fill("0");
    await page.locator('[data-testid="cfg-input-interval_s"]').fill("0");
    await page.locator('[data-testid="submit"]').click();
    const stepsError = await shown(page, "cfg-error-steps", "steps 0 is not refused beside the field");
    const said = squash(await stepsError.innerText());
    log(`steps 0: ${said}`);
    if (!said.includes("at least 1")) throw new CheckFailed(`steps 0 is refused with ${JSON.stringify(said)}`);
    const insideField = await page
      .locator('[data-testid="cfg-field-steps"] [data-testid="cfg-error-steps"]')
      .count();
    if (insideField !== 1) throw new CheckFailed("the steps error is not shown with the steps field");
    if (postsTo("/api/v1/runs").length > 0) throw new CheckFailed("a run was posted with steps 0");
    await page.setViewportSize({ width: 1280, height: 900 });
    await noHorizontalScroll(page);
    await page.screenshot({ path: path.join(shots, "submit-error.png"), fullPage: true });

    // ---- 2. a team the user is not in: only the server knows, and says so beside the project
    await page.locator('[data-testid="cfg-input-steps"]').fill("2");
    await page.locator('[data-testid="submit-project"]').fill(`no-such-team-${stamp}/e2e`);
    await page.locator('[data-testid="submit"]').click();
    const projectError = await shown(page, "submit-project-server-error", "the server's refusal of the project is not shown beside it");
    log(`project refused: ${squash(await projectError.innerText())}`);
    if (postsTo("/api/v1/runs").length !== 1) throw new CheckFailed(`${postsTo("/api/v1/runs").length} runs posted, not 1`);
    await shown(page, "form-error", "the refusal's message is not shown on top of the form");
    if (!/\/runs\/new$/.test(page.url())) throw new CheckFailed(`the refused run left the form for ${page.url()}`);
    if ((await page.locator('[data-testid="cfg-input-steps"]').inputValue()) !== "2") {
      throw new CheckFailed("the form lost its values when the server refused it");
    }

    // ---- 3. fixed: the run is made and its page opens
    await page.locator('[data-testid="submit-project"]').fill(project);
    await page.locator('[data-testid="submit"]').click();
    await page.waitForURL(/\/runs\/\d+$/, { timeout: 15_000 }).catch(() => {
      throw new CheckFailed(`no run page after submitting the fixed form (at ${page.url()})`);
    });
    const runId = new URL(page.url()).pathname.split("/").pop();
    const title = await shown(page, "run-status", "the new run's page shows no status");
    log(`run ${runId}: ${squash(await title.innerText())}`);
    const heading = squash(await page.locator("h1").first().innerText());
    if (heading !== `submit-${stamp}`) throw new CheckFailed(`the run page is titled ${JSON.stringify(heading)}`);
    console.log(`RUN ${runId}`);

    // ---- 4. a sweep from the same form
    await openForm(page);
    await page.locator('[data-testid="submit-project"]').fill(project);
    await page.locator('[data-testid="submit-name"]').fill(`sweep-${stamp}`);
    await page.locator('[data-testid="cfg-input-steps"]').fill("1");
    await page.locator('[data-testid="cfg-input-interval_s"]').fill("0");
    await page.locator('[data-testid="sweep-toggle"]').check();
    await page.locator('[data-testid="cfg-input-tasks_per_step"]').fill("1, 2");
    await page.locator('[data-testid="sweep-seeds"]').fill("3");
    const count = squash(await (await shown(page, "sweep-count", "the sweep shows no run count")).innerText());
    log(`sweep: ${count}`);
    if (count !== "2 × 3 seeds = 6 runs") throw new CheckFailed(`the sweep count reads ${JSON.stringify(count)}`);
    const button = squash(await page.locator('[data-testid="submit"]').innerText());
    if (button !== "Submit sweep (6 runs)") throw new CheckFailed(`the submit button reads ${JSON.stringify(button)}`);
    await noHorizontalScroll(page);
    await page.screenshot({ path: path.join(shots, "submit-form.png"), fullPage: true });
    await page.locator('[data-testid="submit"]').click();
    await page.waitForURL(/\/groups\/\d+$/, { timeout: 30_000 }).catch(async () => {
      const error = await page.locator('[data-testid="form-error"]').innerText().catch(() => "");
      throw new CheckFailed(`no group page after submitting the sweep (at ${page.url()}) ${squash(error)}`);
    });
    const groupId = new URL(page.url()).pathname.split("/").pop();
    const sweeps = postsTo("/api/v1/sweeps");
    if (sweeps.length !== 1) throw new CheckFailed(`${sweeps.length} sweeps posted, not 1`);
    const key = sweeps[0]?.headers["idempotency-key"] ?? "";
    if (!UUID.test(key)) throw new CheckFailed(`the sweep went with Idempotency-Key ${JSON.stringify(key)}`);
    const varies = squash(await (await shown(page, "group-varies", "the group's page does not say what the sweep varies")).innerText());
    log(`group ${groupId}: ${varies}`);
    if (!varies.includes("tasks_per_step")) throw new CheckFailed(`the group varies ${JSON.stringify(varies)}`);
    console.log(`GROUP ${groupId}`);
    noPageErrors(errors);
  } finally {
    await browser.close();
  }
}

runCheck("submit runs from the browser", main);
