/**
 * The state of a team's list page (the alert feed, the failures page): the
 * team from the path, filters kept in the query string, and the server page's offset, which a
 * change of filter or of team takes back to the first page.
 */
import { useState } from "react";
import { useParams, useSearchParams } from "react-router";

import { useTeams } from "../api/hooks";

export function useTeamListState<F extends object>(parse: (params: URLSearchParams) => F) {
  const teamId = Number(useParams().id);
  const teams = useTeams();
  const [params, setParams] = useSearchParams();
  // The offset is the team's: another team (the page is not mounted again) starts from its first.
  const [at, setAt] = useState({ teamId, offset: 0 });
  const offset = at.teamId === teamId ? at.offset : 0;
  const setOffset = (next: number) => setAt({ teamId, offset: next });
  /** Set one filter ("" drops it from the URL), on the first page, replacing the history entry. */
  const setFilter = (name: keyof F & string) => (value: string) => {
    const next = new URLSearchParams(params);
    if (value) next.set(name, value);
    else next.delete(name);
    setOffset(0);
    setParams(next, { replace: true });
  };
  return {
    teamId,
    teams,
    team: teams.data?.results.find((t) => t.id === teamId),
    filters: parse(params),
    offset,
    setOffset,
    setFilter,
  };
}
