"""The live ranking's refresh after a vote, on a real PostgreSQL (and Redis, for the push):

    .venv/bin/python -m benchmarks.ranking_live [--items 50] [--votes 20000] [--rounds 1000]
        [--voters 20] [--prompts 200] [--repeats 5] [--database-url ...] [--redis-url ...]

An eval of `--items` candidates with `--votes` votes (planted strengths, 10 % ties, longer
responses favoured a little) is written straight into `<DATABASE_URL's name>_bench_ranking`
(dropped and made afresh). Then, `--repeats` times: one more vote commits, and its ranking is
refreshed as the `evals.ranking_refresh` task's first part does it (read the votes, fit
Bradley-Terry with `--rounds` bootstrap resamples, win rates, agreement; store the snapshot; hand
`ranking.updated` to the channel layer), side by side in the same run:

- cold: the fit starts from zero (no earlier ranking);
- warm: the fit starts from the previous ranking's scores (what the task does);

the two alternating which goes first, since the machine is shared. Printed: the medians of both
end to end (from the committed vote to the push), of the fit alone, of the point fit alone (the
only part a warm start can shorten: the bootstrap already starts every resample from the point
fit), and of the analysis the task computes after the push (the length-controlled view and the
outlier test's flagged voters, which no push carries). Figures only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.common import Place, add_place_options


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - started, result


def setup_django(place: Place) -> None:
    from controlplane.devstack import ensure_database

    url = place.database("bench_ranking")
    ensure_database(url, fresh=True)
    os.environ["DATABASE_URL"] = url
    if place.redis_url:
        os.environ["REDIS_URL"] = place.redis_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def build_eval(
    items: int, votes: int, voters: int, prompts: int, extra: int, seed: int = 0, team_slug: str = "bench"
) -> tuple[Any, list[Any]]:
    """An OPEN eval with `votes` votes written in bulk, and `extra` more battles (with a voter
    each) for the timed votes, in team `team_slug` (made when missing). Returns the eval and
    those (battle, voter) pairs."""
    from django.contrib.auth import get_user_model

    from controlplane.evals.models import Battle, Candidate, Eval, EvalPrompt, EvalSet, EvalStatus, Generation, Vote
    from controlplane.teams.models import Project, Team

    rng = np.random.default_rng(seed)
    user_model = get_user_model()
    people = user_model.objects.bulk_create(user_model(username=f"voter{n}") for n in range(voters))
    team, _ = Team.objects.get_or_create(slug=team_slug, defaults={"name": "Bench"})
    project = Project.objects.create(team=team, name="ranking")
    eval_set = EvalSet.objects.create(team=team, name="bench", created_by=people[0])
    prompt_rows = EvalPrompt.objects.bulk_create(
        EvalPrompt(eval_set=eval_set, position=i + 1, text=f"prompt {i}") for i in range(prompts)
    )
    evaluation = Eval.objects.create(
        project=project, name="bench", eval_set=eval_set, created_by=people[0], status=EvalStatus.OPEN
    )
    candidates = Candidate.objects.bulk_create(
        Candidate(eval=evaluation, key=f"key{i}", uri=f"/models/{i}", label=f"ckpt-{i:02d}") for i in range(items)
    )
    tokens = rng.integers(50, 600, (items, prompts))
    generations = Generation.objects.bulk_create(
        Generation(eval=evaluation, candidate=c, prompt=p, sample=0, text="x", tokens=int(tokens[i, j]))
        for i, c in enumerate(candidates)
        for j, p in enumerate(prompt_rows)
    )
    by = {(g.candidate_id, g.prompt_id): g for g in generations}
    strength = rng.normal(0.0, 0.3, items)
    pairs: set[tuple[int, int, int]] = set()
    while len(pairs) < votes // 2 + extra:
        a, b = rng.choice(items, 2, replace=False)
        pairs.add((int(a), int(b), int(rng.integers(prompts))))
    ordered = sorted(pairs)
    rng.shuffle(ordered)
    battles = Battle.objects.bulk_create(
        Battle(
            eval=evaluation,
            prompt=prompt_rows[p],
            generation_a=by[(candidates[a].id, prompt_rows[p].id)],
            generation_b=by[(candidates[b].id, prompt_rows[p].id)],
        )
        for a, b, p in ordered
    )
    rows = []
    used = len(battles) - extra
    for n in range(votes):
        index = n % used  # two voters a battle, about
        a, b, p = ordered[index]
        edge = strength[a] - strength[b] + 0.15 * (tokens[a, p] - tokens[b, p]) / (tokens[a, p] + tokens[b, p] + 1)
        if rng.random() < 0.1:
            choice = "tie"
        else:
            choice = "a" if rng.random() < 1.0 / (1.0 + 10.0**-edge) else "b"
        # The k-th vote on a battle from the k-th voter after its own: never the same voter twice.
        rows.append(Vote(battle=battles[index], voter=people[(index + n // used) % voters], choice=choice))
    Vote.objects.bulk_create(rows, batch_size=5000)
    spare = [(battles[-(k + 1)], people[k % voters]) for k in range(extra)]
    return evaluation, spare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=50)
    parser.add_argument("--votes", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--voters", type=int, default=20)
    parser.add_argument("--prompts", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    add_place_options(parser)
    args = parser.parse_args()
    setup_django(Place.of(args))

    from controlplane.evals import ranking as ranking_module
    from controlplane.evals import refresh, stats
    from controlplane.evals.models import RankingSnapshot, Vote
    from controlplane.evals.selectors import eval_vote_arrays

    ranking_module.ROUNDS = args.rounds
    started = time.perf_counter()
    evaluation, spare = build_eval(args.items, args.votes, args.voters, args.prompts, extra=args.repeats + 1)
    print(
        f"## refresh after a vote: {args.items} candidates, {args.votes} votes from {args.voters} voters, "
        f"{args.rounds} resamples (eval written in {time.perf_counter() - started:.1f} s)"
    )

    def refresh_ranking(init: dict[str, float] | None) -> tuple[float, float, float]:
        """The task's first part, end to end: read, fit, store, push. (total s, fit s, CPU s of
        this process: less swayed than the wall clock by whatever else the machine runs)"""
        t0, c0 = time.perf_counter(), time.process_time()
        votes = eval_vote_arrays(evaluation)
        fit_s, ranking = timed(ranking_module.eval_ranking, evaluation, votes=votes, init=init, outliers=False)
        stored = refresh._store_ranking(evaluation.id, votes.version, ranking)
        if stored is not None:
            refresh._push(stored)
        return time.perf_counter() - t0, fit_s, time.process_time() - c0

    # The first ranking, as a first refresh makes it.
    first_s, _, _ = refresh_ranking(None)
    print(f"first refresh (nothing stored yet): {first_s:.2f} s")
    results: dict[str, list[float]] = {k: [] for k in ("cold", "warm", "cold_fit", "warm_fit", "cold_cpu", "warm_cpu")}
    point: dict[str, list[float]] = {"cold": [], "warm": []}
    lc_s: list[float] = []
    flagged_s: list[float] = []
    for repeat in range(args.repeats):
        battle, voter = spare[repeat]
        Vote.objects.create(battle=battle, voter=voter, choice="a")
        previous = RankingSnapshot.objects.get(eval=evaluation).ranking
        init = ranking_module.ranking_strengths(ranking_module.EvalRanking(**previous))
        order = ("cold", "warm") if repeat % 2 == 0 else ("warm", "cold")
        for kind in order:
            # The other kind stored this vote's ranking already: put the previous one back, so
            # both store (and push) as the task would.
            RankingSnapshot.objects.filter(eval=evaluation).update(votes=0, last_vote=0, ranking=previous)
            total, fit, cpu = refresh_ranking(None if kind == "cold" else init)
            results[kind].append(total)
            results[f"{kind}_fit"].append(fit)
            results[f"{kind}_cpu"].append(cpu)
        votes = eval_vote_arrays(evaluation)
        start = np.array([init.get(c.label, 0.0) for c in votes.candidates])
        point["cold"].append(timed(stats.fit_bt, votes.a, votes.b, votes.y, args.items)[0])
        point["warm"].append(timed(stats.fit_bt, votes.a, votes.b, votes.y, args.items, init=start)[0])
        lc_s.append(timed(ranking_module.eval_length_controlled, evaluation, votes=votes)[0])
        flagged_s.append(timed(ranking_module.eval_flagged_voters, votes)[0])
        print(
            f"repeat {repeat + 1}: cold {results['cold'][-1]:.2f} s (fit {results['cold_fit'][-1]:.2f}), "
            f"warm {results['warm'][-1]:.2f} s (fit {results['warm_fit'][-1]:.2f}), "
            f"length-controlled {lc_s[-1]:.2f} s, flagged voters {flagged_s[-1]:.2f} s"
        )
    med = {k: statistics.median(v) for k, v in results.items()}
    for kind, name in (("cold", "cold fit:  "), ("warm", "warm start:")):
        print(
            f"median refresh, vote to push, {name} {med[kind]:.2f} s "
            f"(fit {med[f'{kind}_fit']:.2f} s; CPU {med[f'{kind}_cpu']:.2f} s)"
        )
    print(
        f"median point fit alone: cold {statistics.median(point['cold']) * 1000:.0f} ms, "
        f"warm {statistics.median(point['warm']) * 1000:.0f} ms"
    )
    print(
        f"median analysis after the push: length-controlled view {statistics.median(lc_s):.2f} s, "
        f"flagged voters {statistics.median(flagged_s):.2f} s"
    )
    print(f"target: <= 2 s from the vote to the push (issue 16); load average now {os.getloadavg()[0]:.1f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
