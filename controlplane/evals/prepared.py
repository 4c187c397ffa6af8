"""A voter's reserved next battle, its battles/next body prepared ahead in Redis.

The reservation task (pick.battle_prepare) writes the exact body battles/next returns for the
reserved serving; battles/next then costs the caller's authentication, one Redis round trip
(take the body, so no two requests hand it out) and one conditional UPDATE that marks the
serving shown only while it is still this voter's unshown reservation, its eval OPEN and the
voter allowed to vote there. Whatever fails that condition (taken by an in-line draw, eval
closed, voter removed or made a viewer who may not vote, battle gone with its eval) serves
nothing from here: the request goes the ordinary way, which answers as it always did.

Blindness: the body is the one battles/next returns in any case (battle id, prompt, the two
texts in this voter's order, guidelines), stored where no voter reads. The serving's id, the
only other thing stored, never leaves the server.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any

import redis
from django.conf import settings

from controlplane.dbprepared import prepared_cursor
from controlplane.evals.models import Battle, EvalStatus, Generation, Serving
from controlplane.teams.models import Role

logger = logging.getLogger(__name__)

# A reservation no one asks for again is forgotten after a day (the serving row stays and the
# ordinary path hands it out).
TTL_S = 24 * 3600

_clients: dict[str, redis.Redis] = {}

# The prepared reservation, shown now: still this voter's unshown serving of that battle (a
# uuid4, so a body outlived by its rows matches no other), its eval OPEN, and the voter a member
# of the eval's team who may vote there. One statement, written out as battles._TAKE_RESERVED
# is: no ORM compiling on the hot path; and prepared on its connection (dbprepared.py): its
# joins take twenty times longer to plan than to run.
_SHOWN = "UPDATE evals_serving s SET served_at = now() FROM "
_STILL_THEIRS = """evals_battle b
JOIN evals_eval e ON e.id = b.eval_id
JOIN teams_project p ON p.id = e.project_id
JOIN teams_team t ON t.id = p.team_id
JOIN teams_membership m ON m.team_id = t.id
WHERE s.id = %s AND s.battle_id = %s AND s.voter_id = %s AND s.served_at IS NULL
  AND b.id = s.battle_id AND e.id = %s AND e.status = %s
  AND m.user_id = s.voter_id AND (m.role <> %s OR t.viewers_may_vote)
"""
_CLAIM = _SHOWN + _STILL_THEIRS

# The same, for a caller known by a user token's digest alone (next_route.py): the token is still
# one auth.bearer.resolve_bearer accepts (not revoked, its user active) and this voter's; its id
# and last use come back so it is touched as bearer authentication touches it.
_CLAIM_HOLDER = (
    _SHOWN
    + "teams_apitoken k JOIN auth_user u ON u.id = k.user_id CROSS JOIN "
    + _STILL_THEIRS
    + """  AND k.digest = %s AND k.revoked_at IS NULL AND u.is_active AND k.user_id = s.voter_id
RETURNING k.id, k.last_used_at
"""
)


def _redis() -> redis.Redis:
    url = settings.REDIS_URL
    client = _clients.get(url)
    if client is None:
        client = _clients[url] = redis.Redis.from_url(url, socket_timeout=1.0, socket_connect_timeout=1.0)
    return client


def key(eval_id: int) -> str:
    """One hash per eval, a field per voter: closing the eval drops them all at once."""
    return f"barrel:evals:next:{eval_id}"


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
    """Prepare the body of a reservation just committed. Best effort: without it, battles/next
    hands the reservation out the ordinary way."""
    if not settings.EVALS_NEXT_PREPARED:
        return
    battle = Battle.objects.select_related("prompt", "generation_a", "generation_b", "eval__eval_set").get(
        id=serving.battle_id
    )
    serving.battle = battle
    body = {**battle_body(serving), "battle": str(battle.id)}
    value = json.dumps({"serving": serving.id, "body": body})
    try:
        with _redis().pipeline(transaction=True) as pipe:
            pipe.hset(key(battle.eval_id), str(serving.voter_id), value)
            pipe.expire(key(battle.eval_id), TTL_S)
            pipe.execute()
    except redis.exceptions.RedisError as exc:
        logger.warning("battle body of serving %s not prepared: %s", serving.id, exc)


def _stored(eval_id: int, voter_id: int) -> dict[str, Any] | None:
    """The voter's prepared reservation, taken out of Redis so no two requests hand it out."""
    try:
        with _redis().pipeline(transaction=True) as pipe:
            pipe.hget(key(eval_id), str(voter_id))
            pipe.hdel(key(eval_id), str(voter_id))
            raw, _ = pipe.execute()
    except redis.exceptions.RedisError as exc:
        logger.warning("prepared battle of eval %s not read: %s", eval_id, exc)
        return None
    return None if raw is None else dict(json.loads(raw))


def body_take(*, eval_id: int, voter: Any) -> dict[str, Any] | None:
    """The prepared body of the voter's reserved battle, marked shown now; None when there is
    none to hand out (the caller then goes the ordinary way)."""
    if not settings.EVALS_NEXT_PREPARED:
        return None
    stored = _stored(eval_id, voter.pk)
    if stored is None:
        return None
    with prepared_cursor() as cursor:
        cursor.execute(
            _CLAIM, [stored["serving"], stored["body"]["battle"], voter.pk, eval_id, EvalStatus.OPEN, Role.VIEWER]
        )
        claimed = cursor.rowcount == 1
    return dict(stored["body"]) if claimed else None


def body_take_by_token(
    *, eval_id: int, voter_id: int, token_digest: str
) -> tuple[dict[str, Any], int, datetime | None] | None:
    """body_take for the holder of a user token, the token checked in the same statement: the
    body, the token's id and its last use; None when there is none to hand out or the token is
    no longer good (the caller then goes the ordinary way, which authenticates)."""
    if not settings.EVALS_NEXT_PREPARED:
        return None
    stored = _stored(eval_id, voter_id)
    if stored is None:
        return None
    args = [stored["serving"], stored["body"]["battle"], voter_id, eval_id, EvalStatus.OPEN, Role.VIEWER, token_digest]
    with prepared_cursor() as cursor:
        cursor.execute(_CLAIM_HOLDER, args)
        row = cursor.fetchone()
    return None if row is None else (dict(stored["body"]), row[0], row[1])


def bodies_drop(eval_id: int) -> None:
    """Forget every prepared body of an eval (it closed). Best effort: a body left behind is
    never handed out, since its eval is no longer OPEN."""
    try:
        _redis().delete(key(eval_id))
    except redis.exceptions.RedisError as exc:
        logger.warning("prepared battles of eval %s not dropped: %s", eval_id, exc)
