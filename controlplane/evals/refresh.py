"""The ranking, cached and kept current as votes arrive.

After a vote commits, `evals.ranking_refresh` (tasks.py) brings the eval's RankingSnapshot up to
its votes and pushes the result to the eval's watchers:

1. The ranking (Bradley-Terry with 1,000 bootstrap resamples, win rates, agreement), its fit
   warm-started from the snapshot's scores: stored, then `ranking.updated`.
2. The analysis: the length-controlled view (several times slower) and the outlier test's
   flagged voters (which no push carries, so they need not delay it): stored, then
   `ranking.updated` again. Skipped while more votes wait (their ranking comes first), unless
   the stored analysis is older than ANALYSIS_MAX_LAG_S, so a long burst still moves it.

Bursts coalesce (ranking_refresh_coalesced): every vote marks the eval dirty and enqueues the
task; the task that takes the eval's lock recomputes until the mark stays clear, the others
return at once. So at most one refresh per eval runs at a time, and the last vote is always
reflected: a vote either lands before a pass reads the votes (that pass counts it) or marks the
eval after the mark was cleared (the lock holder loops; past its last look, it takes the lock
again, or the vote's own task does). A pass that fails marks the eval again for the next task.

GET /evals/{id}/ranking serves the snapshot while its key is the eval's, and otherwise computes
the ranking itself (stores it; the view enqueues the task for the analysis). The flagged voters
it gives a manager are always of the votes of its ranking: computed on the spot while the
analysis trails.

The task and its enqueueing live in tasks.py, which imports this module (not the reverse).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import cache
from typing import Any

import redis
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from controlplane.evals.events import eval_progress_on_commit, eval_publish_on_commit, ranking_event
from controlplane.evals.models import Eval, RankingSnapshot
from controlplane.evals.ranking import (
    EvalRanking,
    eval_flagged_voters,
    eval_length_controlled,
    eval_ranking,
    ranking_strengths,
)
from controlplane.evals.selectors import eval_vote_arrays, eval_vote_version
from controlplane.evals.signals import ranking_stored

logger = logging.getLogger(__name__)

# The refresh task's hard time limit (tasks.py) plus a margin: a worker killed mid-refresh
# frees the eval's lock by itself.
LOCK_S = 180
DIRTY_S = 3600  # a dirty mark outlives any queue a worker could be behind on
ANALYSIS_MAX_LAG_S = 30.0
HANDOVER_S = 60.0  # well inside the task's soft time limit

Version = tuple[int, int]


@dataclass(frozen=True)
class CachedRanking:
    ranking: EvalRanking
    # eval_length_controlled's answer, with the `votes` it was fitted on (which may trail the
    # ranking's during a burst); None until it was first computed.
    length_controlled: dict[str, Any] | None
    # The flagged voters of the ranking's votes; None when not computed for them (not asked for).
    flagged_voters: list[str] | None
    # Whether the analysis is of the ranking's votes; if not, a refresh should follow.
    analysis_current: bool


@cache
def _redis(url: str) -> redis.Redis:
    return redis.Redis.from_url(url)


def _lock_key(eval_id: int) -> str:
    return f"barrel:evals:{eval_id}:ranking:lock"


def _dirty_key(eval_id: int) -> str:
    return f"barrel:evals:{eval_id}:ranking:dirty"


def ranking_body(cached: CachedRanking, *, may_manage: bool) -> dict[str, Any]:
    """GET /evals/{id}/ranking's answer (RankingSerializer); the flagged voters only for those
    who may manage the eval."""
    ranking = cached.ranking
    return {
        "rows": ranking.rows,
        "labels": ranking.labels,
        "win_rate": ranking.win_rate,
        "votes": ranking.votes,
        "alpha": ranking.alpha,
        "flagged_voters": (cached.flagged_voters or []) if may_manage else None,
        "length_controlled": cached.length_controlled,
    }


def _ranking_version(snapshot: RankingSnapshot | None) -> Version | None:
    return None if snapshot is None else (snapshot.votes, snapshot.last_vote)


def _analysis_version(snapshot: RankingSnapshot | None) -> Version | None:
    if snapshot is None or snapshot.analysis_votes is None or snapshot.analysis_last_vote is None:
        return None
    return (snapshot.analysis_votes, snapshot.analysis_last_vote)


def _cached(snapshot: RankingSnapshot) -> CachedRanking:
    """The snapshot as served: its flagged voters only if they are of its ranking's votes."""
    current = _analysis_version(snapshot) == _ranking_version(snapshot)
    flagged = snapshot.flagged_voters if current else None
    return CachedRanking(EvalRanking(**snapshot.ranking), snapshot.length_controlled, flagged, current)


def _replaces(stored: Version | None, mine: Version, eval_id: int) -> bool:
    """Whether a result computed from `mine` should replace one computed from `stored`: when it
    is newer (votes are only added, so a later state has more), or when what is stored is no
    longer the eval's and mine is (votes deleted with their battle). Never an older result over
    a newer one: two refreshes that finish out of order leave the newer."""
    if stored is None or mine > stored:
        return True
    return mine != stored and eval_vote_version(eval_id) == mine


def _locked_snapshot(eval_id: int, ranking: EvalRanking, version: Version) -> tuple[RankingSnapshot, bool]:
    """The eval's snapshot, locked for this transaction; created from `ranking` when there is
    none (then True)."""
    snapshot = RankingSnapshot.objects.select_for_update().filter(eval_id=eval_id).first()
    if snapshot is not None:
        return snapshot, False
    try:
        with transaction.atomic():
            created = RankingSnapshot.objects.create(
                eval_id=eval_id,
                votes=version[0],
                last_vote=version[1],
                ranking=dataclasses.asdict(ranking),
                computed_at=timezone.now(),
            )
        return created, True
    except IntegrityError:  # another refresh created it a moment ago
        return RankingSnapshot.objects.select_for_update().get(eval_id=eval_id), False


@transaction.atomic
def _store_ranking(eval_id: int, version: Version, ranking: EvalRanking) -> RankingSnapshot | None:
    """Store the ranking unless the snapshot holds a newer one; the snapshot when stored."""
    snapshot, created = _locked_snapshot(eval_id, ranking, version)
    if not created:
        if not _replaces(_ranking_version(snapshot), version, eval_id):
            return None
        snapshot.votes, snapshot.last_vote = version
        snapshot.ranking = dataclasses.asdict(ranking)
        snapshot.computed_at = timezone.now()
        snapshot.save(update_fields=["votes", "last_vote", "ranking", "computed_at"])
    ranking_stored.send(sender=RankingSnapshot, eval_id=eval_id)
    return snapshot


@transaction.atomic
def _store_analysis(eval_id: int, version: Version, view: dict[str, Any], flagged: list[str]) -> RankingSnapshot | None:
    snapshot = RankingSnapshot.objects.select_for_update().filter(eval_id=eval_id).first()
    if snapshot is None or not _replaces(_analysis_version(snapshot), version, eval_id):
        return None
    snapshot.analysis_votes, snapshot.analysis_last_vote = version
    snapshot.length_controlled, snapshot.flagged_voters = view, flagged
    snapshot.analysis_at = timezone.now()
    fields = ["analysis_votes", "analysis_last_vote", "length_controlled", "flagged_voters", "analysis_at"]
    snapshot.save(update_fields=fields)
    return snapshot


def _push(snapshot: RankingSnapshot) -> None:
    body = ranking_body(_cached(snapshot), may_manage=False)
    eval_publish_on_commit(snapshot.eval_id, ranking_event(snapshot.eval_id, body))


def ranking_cached(evaluation: Eval, *, with_flagged: bool) -> CachedRanking:
    """The eval's ranking as of its votes now: the snapshot while it is current, otherwise
    computed here and stored. The length-controlled view is the snapshot's, whatever votes it
    was fitted on (`analysis_current` says whether a refresh should follow). `with_flagged`:
    the flagged voters of exactly these votes, computed here if the analysis trails."""
    version = eval_vote_version(evaluation.id)
    snapshot = RankingSnapshot.objects.filter(eval_id=evaluation.id).first()
    if snapshot is not None and _ranking_version(snapshot) == version:
        cached = _cached(snapshot)
        if with_flagged and cached.flagged_voters is None:
            votes = eval_vote_arrays(evaluation)
            if votes.version == version:
                return dataclasses.replace(cached, flagged_voters=eval_flagged_voters(votes))
            # A vote landed meanwhile: the ranking is stale too; compute both below.
        else:
            return cached
    votes = eval_vote_arrays(evaluation)
    init = None if snapshot is None else ranking_strengths(EvalRanking(**snapshot.ranking))
    ranking = eval_ranking(evaluation, votes=votes, init=init, outliers=with_flagged)
    stored = _store_ranking(evaluation.id, votes.version, ranking)
    if stored is not None:
        _push(stored)
    lc = None if snapshot is None else snapshot.length_controlled
    flagged = ranking.flagged_voters if with_flagged else None
    return CachedRanking(ranking, lc, flagged, _analysis_version(stored or snapshot) == votes.version)


def _analysis_due(snapshot: RankingSnapshot | None) -> bool:
    """Whether the analysis is old enough to be redone while votes still wait."""
    if snapshot is None or snapshot.analysis_at is None:
        return True
    return timezone.now() - snapshot.analysis_at > timedelta(seconds=ANALYSIS_MAX_LAG_S)


def ranking_refresh(*, eval_id: int, dirty: Callable[[], Any] = lambda: False) -> bool:
    """Bring the eval's snapshot up to its votes, pushing each part as it is stored. `dirty`
    says whether more votes are waiting: then the slow analysis waits, unless it is
    ANALYSIS_MAX_LAG_S old. Whether anything was computed."""
    evaluation = Eval.objects.filter(id=eval_id).first()
    if evaluation is None:
        return False
    snapshot = RankingSnapshot.objects.filter(eval_id=eval_id).first()
    version = eval_vote_version(eval_id)
    if snapshot is not None and _ranking_version(snapshot) == version and _analysis_version(snapshot) == version:
        return False
    votes = eval_vote_arrays(evaluation)  # perhaps a vote or two past `version`: the key is its own
    if _ranking_version(snapshot) != votes.version:
        init = None if snapshot is None else ranking_strengths(EvalRanking(**snapshot.ranking))
        # No outlier test here: the push leaves the flagged voters out, so they come after it.
        ranking = eval_ranking(evaluation, votes=votes, init=init, outliers=False)
        stored = _store_ranking(eval_id, votes.version, ranking)
        if stored is not None:
            _push(stored)
            eval_progress_on_commit(eval_id)
            snapshot = stored
    if _analysis_version(snapshot) != votes.version and (not dirty() or _analysis_due(snapshot)):
        view = eval_length_controlled(evaluation, votes=votes)
        stored = _store_analysis(eval_id, votes.version, view, eval_flagged_voters(votes))
        if stored is not None:
            _push(stored)
    return True


@dataclass(frozen=True)
class Coalesced:
    passes: int  # refresh passes this call made (0: another refresh held the eval)
    handover: bool  # the mark is set again for a fresh task: enqueue one


def ranking_refresh_coalesced(*, eval_id: int) -> Coalesced:
    """The refresh task's body: mark the eval dirty; if no refresh of it runs, refresh until the
    mark stays clear (see the module's docstring)."""
    client = _redis(settings.REDIS_URL)
    dirty = _dirty_key(eval_id)
    client.set(dirty, 1, ex=DIRTY_S)
    lock = client.lock(_lock_key(eval_id), timeout=LOCK_S, blocking=False)
    passes = 0
    started = time.monotonic()
    while True:
        if not lock.acquire():
            return Coalesced(passes, handover=False)  # the holder will see the mark
        try:
            # Votes that never pause would keep one task looping past its time limit: after
            # HANDOVER_S it stops and asks for a fresh task.
            while client.delete(dirty):
                if time.monotonic() - started > HANDOVER_S:
                    client.set(dirty, 1, ex=DIRTY_S)
                    return Coalesced(passes, handover=True)
                passes += 1
                try:
                    ranking_refresh(eval_id=eval_id, dirty=lambda: client.exists(dirty))
                except BaseException:  # a time limit too: the pass's votes are owed a refresh
                    client.set(dirty, 1, ex=DIRTY_S)
                    raise
        finally:
            try:
                lock.release()
            except redis.exceptions.LockError:  # it expired under us: another may hold it now
                logger.warning("eval %s: the ranking refresh outlived its %d s lock", eval_id, LOCK_S)
        if not client.exists(dirty):
            return Coalesced(passes, handover=False)
        # Marked after the last look by a task that found the lock still held and returned:
        # take the lock again (or leave the mark to whoever took it meanwhile).
