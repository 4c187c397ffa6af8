"""A voter's reserved next battle, its battles/next body prepared ahead in its row.

The reservation task (pick.battle_prepare) writes, in the reservation's own transaction, the
exact body battles/next returns for the reserved serving (Serving.body); battles/next then costs
the caller's authentication and one statement: an UPDATE that takes the voter's unshown
reservation with a body (row-locked, one request wins it), marks it shown and returns its body,
only while its eval is OPEN and the voter allowed to vote there. Whatever fails that condition
(nothing reserved, taken by another request, eval closed, voter removed or made a viewer who may
not vote) serves nothing from here: the request goes the ordinary way, which answers as it
always did. A body is cleared once its serving is shown, whichever way, and when its eval closes.

Blindness: the body is the one battles/next returns in any case (battle id, prompt, the two
texts in this voter's order, guidelines), in a column no API reads.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.conf import settings

from controlplane.dbprepared import prepared_cursor
from controlplane.evals.models import Battle, EvalStatus, Generation, Serving
from controlplane.teams.models import Role

# The voter's prepared reservation, shown now: their unshown serving with a body in that eval
# (locked; one another request holds is skipped, not waited for), its eval OPEN, and the voter a
# member of the eval's team who may vote there. Its body comes back as it was before this
# statement cleared it. One statement, written out as battles._TAKE_RESERVED is: no ORM compiling
# on the hot path; and prepared on its connection (dbprepared.py): its joins take twenty times
# longer to plan than to run.
_TAKE = """UPDATE evals_serving s SET served_at = now(), body = ''
FROM (
    SELECT r.id, r.body FROM evals_serving r JOIN evals_battle rb ON rb.id = r.battle_id
    WHERE r.voter_id = %s AND rb.eval_id = %s AND r.served_at IS NULL AND r.body <> ''
    ORDER BY r.id LIMIT 1 FOR UPDATE OF r SKIP LOCKED
) o,
evals_eval e
JOIN teams_project p ON p.id = e.project_id
JOIN teams_team t ON t.id = p.team_id
JOIN teams_membership m ON m.team_id = t.id
"""
_STILL_THEIRS = """WHERE s.id = o.id AND e.id = %s AND e.status = %s
  AND m.user_id = s.voter_id AND (m.role <> %s OR t.viewers_may_vote)
"""
_CLAIM = _TAKE + _STILL_THEIRS + "RETURNING o.body\n"

# The same, for a caller known by a user token's digest alone (next_route.py): the token is still
# one auth.bearer.resolve_bearer accepts (not revoked, its user active) and this voter's; its id
# and last use come back so it is touched as bearer authentication touches it.
_CLAIM_HOLDER = (
    _TAKE
    + "CROSS JOIN teams_apitoken k JOIN auth_user u ON u.id = k.user_id\n"
    + _STILL_THEIRS
    + """  AND k.digest = %s AND k.revoked_at IS NULL AND u.is_active AND k.user_id = s.voter_id
RETURNING o.body, k.id, k.last_used_at
"""
)


def sides(serving: Serving) -> tuple[Generation, Generation]:
    """The battle's generations as this voter sees them: (A, B)."""
    battle = serving.battle
    return (battle.generation_b, battle.generation_a) if serving.swapped else (battle.generation_a, battle.generation_b)


def battle_body(serving: Serving) -> dict[str, Any]:
    """A battle as its voter is shown it: nothing that names a candidate, run or step."""
    battle = serving.battle
    shown_a, shown_b = sides(serving)
    return {
        "battle": battle.id,
        "prompt": {"text": battle.prompt.text, "reference": battle.prompt.reference},
        "a": shown_a.text,
        "b": shown_b.text,
        "guidelines": battle.eval.eval_set.guidelines,
    }


def body_store(serving: Serving) -> None:
    """Prepare the body of a reservation being made, in its transaction (nothing with
    EVALS_NEXT_PREPARED off: battles/next then hands it out the ordinary way)."""
    if not settings.EVALS_NEXT_PREPARED:
        return
    battle = Battle.objects.select_related("prompt", "generation_a", "generation_b", "eval__eval_set").get(
        id=serving.battle_id
    )
    serving.battle = battle
    body = json.dumps({**battle_body(serving), "battle": str(battle.id)})
    Serving.objects.filter(id=serving.id).update(body=body)


def body_take(*, eval_id: int, voter: Any) -> bytes | None:
    """The prepared body (JSON) of the voter's reserved battle, marked shown now; None when there
    is none to hand out (the caller then goes the ordinary way)."""
    if not settings.EVALS_NEXT_PREPARED:
        return None
    with prepared_cursor() as cursor:
        cursor.execute(_CLAIM, [voter.pk, eval_id, eval_id, EvalStatus.OPEN, Role.VIEWER])
        row = cursor.fetchone()
    return None if row is None else row[0].encode()


def body_take_by_token(*, eval_id: int, voter_id: int, token_digest: str) -> tuple[bytes, int, datetime | None] | None:
    """body_take for the holder of a user token, the token checked in the same statement: the
    body, the token's id and its last use; None when there is none to hand out or the token is
    no longer good (the caller then goes the ordinary way, which authenticates)."""
    if not settings.EVALS_NEXT_PREPARED:
        return None
    args = [voter_id, eval_id, eval_id, EvalStatus.OPEN, Role.VIEWER, token_digest]
    with prepared_cursor() as cursor:
        cursor.execute(_CLAIM_HOLDER, args)
        row = cursor.fetchone()
    return None if row is None else (row[0].encode(), row[1], row[2])


def bodies_drop(eval_id: int) -> int:
    """Clear the prepared bodies of an eval's unshown reservations (it closed): never handed out
    once it is not OPEN, and no longer worth their space. How many."""
    return Serving.objects.filter(battle__eval_id=eval_id, served_at__isnull=True).exclude(body="").update(body="")
