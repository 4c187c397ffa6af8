/** A team's secrets on its settings page: names and times for everyone, set and delete for admins. */
import { cleanup, fireEvent, screen, waitFor, within } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import type { Team } from "../../api/types";
import { stubApi } from "../../test/api";
import { invalid, page, renderRoutes, sentBodies, team } from "../evals/testing";
import type { TeamSecret } from "./api";
import { TeamSettingsPage } from "./TeamSettingsPage";

const HF: TeamSecret = {
  name: "HF_TOKEN",
  created_at: "2026-12-01T09:00:00Z",
  updated_at: "2026-12-01T09:30:00Z",
  updated_by: "alice",
};

beforeEach(() => {
  document.cookie = "csrftoken=test-token";
});

afterEach(() => {
  cleanup();
  document.cookie = "csrftoken=; expires=Thu, 01 Jan 1970 00:00:00 GMT";
  vi.unstubAllGlobals();
});

/** The API with a team of `role` whose secrets live in `secrets` (PUT and DELETE change it). */
function api(role: Team["role"], secrets: TeamSecret[]) {
  return stubApi({
    "GET /api/v1/teams": () => page([team(role)]),
    "GET /api/v1/teams/1/secrets": () => secrets,
    "PUT /api/v1/teams/1/secrets/WANDB_API_KEY": () => {
      const made = { ...HF, name: "WANDB_API_KEY" };
      secrets.push(made);
      return new Response(JSON.stringify(made), { status: 201, headers: { "Content-Type": "application/json" } });
    },
    "PUT /api/v1/teams/1/secrets/1BAD": () => invalid({ name: ["not a variable name"] }),
    "DELETE /api/v1/teams/1/secrets/HF_TOKEN": () => {
      secrets.splice(secrets.findIndex((s) => s.name === "HF_TOKEN"), 1);
      return new Response(null, { status: 204 });
    },
  });
}

function render() {
  renderRoutes(<TeamSettingsPage />, { path: "/teams/1/settings", route: "/teams/:id/settings" });
}

function type(testId: string, value: string) {
  fireEvent.change(screen.getByTestId(testId), { target: { value } });
}

describe("a team's secrets", () => {
  it("lets an admin set one, see the server's refusal of a name beside it, and delete one after confirming", async () => {
    const calls = api("admin", [{ ...HF }]);
    render();
    const row = await screen.findByRole("row", { name: /HF_TOKEN/ });
    expect(row.textContent).toContain("alice");
    const value = screen.getByTestId("secret-value") as HTMLInputElement;
    expect([value.type, value.autocomplete]).toEqual(["password", "new-password"]);

    type("secret-name", "1BAD");
    type("secret-value", "s3cret-value");
    fireEvent.click(screen.getByTestId("secret-set"));
    expect((await screen.findByTestId("secret-name-error")).textContent).toBe("not a variable name");

    type("secret-name", "WANDB_API_KEY");
    fireEvent.click(screen.getByTestId("secret-set"));
    expect((await screen.findByTestId("secrets-notice")).textContent).toContain("WANDB_API_KEY set");
    await screen.findByRole("row", { name: /WANDB_API_KEY/ });
    expect((screen.getByTestId("secret-value") as HTMLInputElement).value).toBe("");
    expect(sentBodies(vi.mocked(fetch).mock.calls, "PUT", "/api/v1/teams/1/secrets/WANDB_API_KEY")).toEqual([
      { value: "s3cret-value" },
    ]);
    // No value is shown anywhere on the page.
    expect(document.body.textContent).not.toContain("s3cret-value");

    // Delete asks first; Keep sends nothing.
    const hf = () => screen.getAllByTestId("secret-row").find((r) => r.dataset.name === "HF_TOKEN") as HTMLElement;
    fireEvent.click(within(hf()).getByTestId("secret-delete"));
    fireEvent.click(within(hf()).getByTestId("secret-delete-cancel"));
    expect(calls.calls.some((c) => c.startsWith("DELETE"))).toBe(false);
    fireEvent.click(within(hf()).getByTestId("secret-delete"));
    expect(within(hf()).getByRole("group").getAttribute("aria-label")).toBe("Delete HF_TOKEN?");
    fireEvent.click(within(hf()).getByTestId("secret-delete-confirm"));
    expect((await screen.findByTestId("secrets-notice")).textContent).toContain("HF_TOKEN deleted");
    await waitFor(() => expect(screen.queryAllByTestId("secret-row").map((r) => r.dataset.name)).toEqual(["WANDB_API_KEY"]));
  });

  it("shows a member the names only", async () => {
    api("member", [{ ...HF }]);
    render();
    await screen.findByRole("row", { name: /HF_TOKEN/ });
    expect(screen.queryByTestId("secret-form")).toBeNull();
    expect(screen.queryByTestId("secret-delete")).toBeNull();
    expect(screen.getByTestId("secrets-panel").textContent).toContain("Only the team's admins set and delete them.");
  });

  it("says when the team has none", async () => {
    api("viewer", []);
    render();
    expect((await screen.findByText("Lab has no secrets yet."))).toBeTruthy();
  });
});
