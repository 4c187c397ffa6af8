import { QueryClient } from "@tanstack/react-query";
import { describe, expect, it } from "vitest";

import { queryKeys } from "../../api/queryKeys";
import type { Eval, Ranking } from "../../api/types";
import { evalDetail, ranking } from "../../test/api";
import { applyEvalMessage, evalSocketUrl, parseEvalMessage } from "./live";

function publicRanking(overrides: Partial<Ranking> = {}) {
  const { flagged_voters: _flagged, ...rest } = ranking(overrides);
  return rest;
}

describe("the eval's live messages", () => {
  it("opens ws:// on http and wss:// on https", () => {
    expect(evalSocketUrl(3, { protocol: "http:", host: "h:8000" })).toBe("ws://h:8000/ws/evals/3/");
    expect(evalSocketUrl(3, { protocol: "https:", host: "h" })).toBe("wss://h/ws/evals/3/");
  });

  it("ignores frames that are not the eval's typed messages", () => {
    expect(parseEvalMessage("not json")).toBeNull();
    expect(parseEvalMessage(JSON.stringify({ type: "run.status" }))).toBeNull();
    expect(parseEvalMessage(new Blob())).toBeNull();
    expect(parseEvalMessage(JSON.stringify({ type: "eval.progress", eval_id: 3 }))?.type).toBe("eval.progress");
  });

  it("patches the cached ranking, keeps a newer one and another eval's alone", () => {
    const client = new QueryClient();
    client.setQueryData(queryKeys.ranking(3), ranking({ votes: 7, flagged_voters: null }));
    applyEvalMessage(client, 3, { type: "ranking.updated", eval_id: 3, ranking: publicRanking({ votes: 9 }) });
    expect(client.getQueryData<Ranking>(queryKeys.ranking(3))?.votes).toBe(9);
    expect(client.getQueryData<Ranking>(queryKeys.ranking(3))?.flagged_voters).toBeNull();
    applyEvalMessage(client, 3, { type: "ranking.updated", eval_id: 3, ranking: publicRanking({ votes: 8 }) });
    expect(client.getQueryData<Ranking>(queryKeys.ranking(3))?.votes).toBe(9);
    // The length-controlled view of the same votes, arriving after the ranking, is taken.
    const lc = { votes: 9, beta: 0.01, rows: [] };
    applyEvalMessage(client, 3, {
      type: "ranking.updated",
      eval_id: 3,
      ranking: publicRanking({ votes: 9, length_controlled: lc }),
    });
    expect(client.getQueryData<Ranking>(queryKeys.ranking(3))?.length_controlled).toEqual(lc);
    applyEvalMessage(client, 3, { type: "ranking.updated", eval_id: 4, ranking: publicRanking({ votes: 20 }) });
    expect(client.getQueryData<Ranking>(queryKeys.ranking(3))?.votes).toBe(9);
  });

  it("does not create a ranking the page has not fetched", () => {
    const client = new QueryClient();
    applyEvalMessage(client, 3, { type: "ranking.updated", eval_id: 3, ranking: publicRanking() });
    expect(client.getQueryData(queryKeys.ranking(3))).toBeUndefined();
  });

  it("patches the eval's status and progress", () => {
    const client = new QueryClient();
    client.setQueryData(queryKeys.evalDetail(3), evalDetail({ status: "GENERATING" }));
    const progress = { generations: 40, expected: 40, battles: 0, votes: 0, prompts: 20, prompts_covered: 0 };
    applyEvalMessage(client, 3, {
      type: "eval.status",
      eval_id: 3,
      status: "OPEN",
      failure_reason: "",
      closed_at: null,
      progress,
    });
    expect(client.getQueryData<Eval>(queryKeys.evalDetail(3))).toMatchObject({ status: "OPEN", progress });
  });
});
