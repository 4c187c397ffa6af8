"""The run diagnosis's views on synthetic series with planted answers (pure functions: no
database), folded in batches as ingest would hand them over."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controlplane.diagnostics import diagnosis as dx
from controlplane.diagnostics.feed import NewPoints, decode, encode, merge, select


def fold_in_batches(data: dict[str, tuple[np.ndarray, np.ndarray]], batch: int = 7) -> dict:
    state = dx.new_state()
    n = max(len(s) for s, _ in data.values())
    for lo in range(0, n, batch):
        part = {k: (s[lo : lo + batch], v[lo : lo + batch]) for k, (s, v) in data.items() if len(s[lo : lo + batch])}
        dx.fold(state, NewPoints(run_id=1, series=part))
    return state


SYNC_TRAINER_BOUND = {
    "time/rollout_s": 2.0,
    "time/reward_s": 1.0,
    "idle/trainer_wait_s": 2.2,
    "time/old_logprob_s": 0.5,
    "time/train_s": 6.0,
    "time/weight_sync_s": 0.3,
    "time/step_s": 9.0,
}


def test_a_planted_trainer_bound_names_train_and_estimates_the_halving():
    state = fold_in_batches(_series(SYNC_TRAINER_BOUND))
    view = dx.barrel_view(state)
    assert view["bounding"] == "train"
    # Sync: nothing of the producer hides behind the trainer; halving train saves 3 s of 9.
    assert abs(view["what_if"]["step_s"] - 6.0) < 1e-6
    shares = {s["name"]: s["share"] for s in view["staves"]}
    assert abs(shares["train"] - 6.0 / 9.0) < 1e-9


def _series(values: dict[str, float], steps: int = 200) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    s = np.arange(steps, dtype=np.int64)
    return {k: (s, np.full(steps, v)) for k, v in values.items()}


def test_a_stave_reported_on_some_steps_costs_its_share_of_every_step():
    """A checkpoint of 20 s every 10th step costs 2 s a step: its mean and share are over all
    steps (the step time includes it where it happened), not over the steps that reported it."""
    data = _series(SYNC_TRAINER_BOUND | {"time/step_s": 11.0})
    s = np.arange(0, 200, 10, dtype=np.int64)
    data["time/checkpoint_s"] = (s, np.full(len(s), 20.0))
    view = dx.barrel_view(fold_in_batches(data))
    checkpoint = next(v for v in view["staves"] if v["name"] == "checkpoint")
    assert checkpoint["mean_s"] == pytest.approx(2.0) and checkpoint["share"] == pytest.approx(2.0 / 11.0)
    assert checkpoint["saved_if_2x_s"] == pytest.approx(1.0)


def test_a_planted_slow_reward_is_named_and_a_growing_stave_has_a_trend():
    planted = dict(SYNC_TRAINER_BOUND, **{"time/reward_s": 12.0, "idle/trainer_wait_s": 12.2, "time/step_s": 19.0})
    data = _series(planted)
    s = data["time/train_s"][0]
    data["time/train_s"] = (s, 6.0 + 0.01 * s)  # update time growing with steps
    state = fold_in_batches(data)
    view = dx.barrel_view(state)
    assert view["bounding"] == "reward"
    train = next(x for x in view["staves"] if x["name"] == "train")
    assert abs(train["slope_s_per_step"] - 0.01) < 1e-9
    assert train["growth"] > 0.2
    rollout = next(x for x in view["staves"] if x["name"] == "rollout")
    assert abs(rollout["slope_s_per_step"]) < 1e-12


def test_in_async_mode_hidden_rollout_is_not_bounding():
    # The producer (8 s) runs behind the trainer (7 s): the trainer waits only 1 s a step.
    planted = {
        "time/rollout_s": 8.0,
        "time/reward_s": 1.0,
        "idle/trainer_wait_s": 1.0,
        "time/train_s": 6.0,
        "time/old_logprob_s": 1.0,
        "time/step_s": 8.0,
    }
    view = dx.barrel_view(fold_in_batches(_series(planted)))
    assert view["bounding"] == "rollout"  # halving it removes the wait: 1 s
    assert abs(view["what_if"]["step_s"] - 7.0) < 1e-9
    saved = {s["name"]: s["saved_if_2x_s"] for s in view["staves"]}
    assert abs(saved["train"]) < 1e-9  # train halved: the 8 s producer is exposed instead


def test_planted_engine_mismatch_is_attributed_to_the_engine_and_flagged_at_its_steps():
    rng = np.random.default_rng(0)
    s = np.arange(300, dtype=np.int64)
    engine = 1e-6 * (1 + 0.1 * rng.random(300))
    engine[[120, 121, 250]] = 5e-3  # a refit bug at these steps
    data = {
        "mismatch/engine_kl": (s, engine),
        "mismatch/lag_kl": (s, np.full(300, 1e-7)),
        "offpolicy/staleness_mean": (s, np.zeros(300)),
    }
    view = dx.mismatch_view(fold_in_batches(data, batch=13))
    assert view["attributed_to"] == "engine"
    assert [f["step"] for f in view["flags"]] == [120, 121, 250]


def test_a_small_spike_above_the_trailing_median_is_flagged():
    s = np.arange(100, dtype=np.int64)
    engine = np.full(100, 1e-6) * (1 + 0.01 * np.sin(s))
    engine[60] = 5e-5
    view = dx.mismatch_view(fold_in_batches({"mismatch/engine_kl": (s, engine)}))
    assert [(f["step"], f["why"]) for f in view["flags"]] == [(60, "spike")]


def test_planted_staleness_is_attributed_to_lag_by_bucket():
    s = np.arange(120, dtype=np.int64)
    staleness = (s % 3).astype(np.float64)
    data = {
        "mismatch/engine_kl": (s, np.full(120, 1e-6)),
        "mismatch/lag_kl": (s, 1e-4 * staleness),
        "offpolicy/staleness_mean": (s, staleness),
        "perf/tokens_per_s": (s, np.full(120, 100.0)),
        "perf/samples_per_s": (s, np.full(120, 1.0)),
        "time/step_s": (s, np.full(120, 1.0)),
        "reward/zero_std_frac": (s, np.zeros(120)),
    }
    view = dx.mismatch_view(fold_in_batches(data))
    assert view["attributed_to"] == "lag"
    by = {b["staleness"]: b for b in view["by_staleness"]}
    assert sorted(by) == [0, 1, 2]
    assert by[0]["lag_kl"] == 0.0 and abs(by[2]["lag_kl"] - 2e-4) < 1e-12
    assert by[2]["steps"] == 40
    assert not view["flagged"]


def test_no_learning_signal_is_flagged_with_advice_and_a_healthy_run_is_not():
    s = np.arange(60, dtype=np.int64)
    low = dx.signal_view(fold_in_batches({"reward/zero_std_frac": (s, np.full(60, 0.94))}))
    assert low["flagged"] and "group size" in low["advice"]
    ok = dx.signal_view(fold_in_batches({"reward/zero_std_frac": (s, np.where(s < 40, 0.9, 0.2))}))
    assert not ok["flagged"] and ok["advice"] is None


def test_goodput_counts_drops_and_zero_signal_groups():
    s = np.arange(10, dtype=np.int64)
    data = {
        "perf/tokens_per_s": (s, np.full(10, 100.0)),  # 1000 tokens a step over 10 s
        "perf/samples_per_s": (s, np.full(10, 1.0)),  # 10 samples: 100 tokens each
        "time/step_s": (s, np.full(10, 10.0)),
        "offpolicy/dropped": (s, np.full(10, 1.0)),  # one group of 4 dropped: 400 tokens
        "train/group_size": (s, np.full(10, 4.0)),
        "reward/zero_std_frac": (s, np.full(10, 0.5)),
    }
    card = dx.scorecard(fold_in_batches(data, batch=3), cpus=4, gpus=1, target=None)
    assert abs(card["goodput"] - 500 / 1400) < 1e-9


def test_scorecard_reward_per_hour_and_time_to_target():
    s = np.arange(100, dtype=np.int64)
    data = {"reward/mean": (s, s / 100.0), "time/step_s": (s, np.full(100, 36.0))}
    card = dx.scorecard(fold_in_batches(data), cpus=2.0, gpus=1.0, target=0.5)
    # 100 steps of 36 s = 1 h; reward from ~0.045 (first tenth) to ~0.945 (last tenth).
    assert abs(card["wall_s"] - 3600) < 1e-6
    assert abs(card["reward_gained"] - 0.9) < 1e-9
    assert abs(card["reward_per_cpu_hour"] - 0.45) < 1e-9 and abs(card["reward_per_gpu_hour"] - 0.9) < 1e-9
    assert card["time_to_target"] == {"target": 0.5, "step": 50, "wall_s": 51 * 36.0}
    group = dx.group_scorecard([card, dx.scorecard(fold_in_batches(data), cpus=4.0, gpus=None, target=0.5)])
    per_cpu = group["reward_per_cpu_hour"]
    assert per_cpu["min"] is not None and per_cpu["max"] is not None
    assert abs(per_cpu["min"] - per_cpu["max"] / 2) < 1e-12
    assert group["reward_per_gpu_hour"]["runs"] == 1


def test_history_stays_bounded_as_steps_grow():
    s = np.arange(100_000, dtype=np.int64)
    state = fold_in_batches({"time/step_s": (s, np.ones(100_000))}, batch=10_000)
    assert state["buckets"]["n"] <= dx.MAX_BUCKETS
    assert sum(state["buckets"]["keys"]["time/step_s"][1]) == 100_000  # every point in one bucket
    assert dx._mean(state, "time/step_s") == 1.0


def test_feed_keeps_diagnosed_and_non_finite_keys_and_the_last_write_of_a_step():
    names = ["reward/mean", "custom/x", "custom/bad", "time/step_s"]
    keys = [0, 1, 2, 3, 0, 2]
    steps = [5, 5, 5, 5, 4, 6]
    values = [1.0, 2.0, float("nan"), 3.0, 0.5, 1.0]
    picked = select(names, keys, steps, values)
    assert picked is not None and picked[0] == ["reward/mean", "custom/bad", "time/step_s"]
    again = select(["reward/mean"], [0], [5], [9.0])
    assert again is not None
    new = merge(7, [decode(encode(*picked)), decode(encode(*again))])
    assert new.series["reward/mean"][0].tolist() == [4, 5] and new.series["reward/mean"][1].tolist() == [0.5, 9.0]
    assert np.isnan(new.series["custom/bad"][1][0])
    assert select(["custom/x"], [0], [1], [1.0]) is None


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.sampled_from("abcd"), st.integers(0, 12), st.floats(allow_nan=False)), max_size=20),
        min_size=1,
        max_size=4,
    )
)
def test_merge_keeps_each_steps_last_write_in_step_order(batches: list[list[tuple[str, int, float]]]) -> None:
    """Batches in any order, steps repeated or late: per key, ascending steps, each the value it
    was sent last (against a plain dict, point by point); in-order batches take the fast path."""
    parts = []
    for points in batches:
        names = sorted({name for name, _, _ in points}, reverse=True)  # each batch its own name order
        parts.append(
            (
                names,
                np.asarray([names.index(name) for name, _, _ in points], dtype=np.int32),
                np.asarray([step for _, step, _ in points], dtype=np.int64),
                np.asarray([value for _, _, value in points], dtype=np.float64),
            )
        )
    expected: dict[str, dict[int, float]] = {}
    for points in batches:
        for name, step, value in points:
            expected.setdefault(name, {})[step] = value
    got = merge(1, parts).series
    assert {k: dict(zip(s.tolist(), v.tolist(), strict=True)) for k, (s, v) in got.items()} == expected
    assert all((np.diff(s) > 0).all() for s, _ in got.values())


@pytest.mark.parametrize("names", [3, 300, 70_000])
@pytest.mark.parametrize("steps", [[5, 5, 7], [0, 2**40, 3], [-(2**62), 2**62, 0], []])
def test_a_blob_gives_back_its_points_whatever_the_names_and_steps_span(names: int, steps: list[int]) -> None:
    """Narrow columns where they fit (few names, steps within 2**32 of the least), wide where not;
    and a blob in the first layout (pending across an upgrade) reads as it was written."""
    import msgpack  # type: ignore[import-untyped]

    from controlplane.diagnostics.feed import FORMAT

    labels = [f"k{i}" for i in range(names)]
    keys = np.asarray([names - 1, 0, names // 2][: len(steps)], dtype=np.int32)
    values = np.asarray([0.5, -np.inf, np.nan][: len(steps)])
    blob = encode(labels, keys, np.asarray(steps, dtype=np.int64), values)
    assert msgpack.unpackb(blob)[0] == FORMAT
    old = msgpack.packb([labels, keys.tobytes(), np.asarray(steps, dtype=np.int64).tobytes(), values.tobytes()])
    for got in (decode(blob), decode(old)):
        assert got[0] == labels
        assert got[1].dtype == np.int32 and got[1].tolist() == keys.tolist()
        assert got[2].dtype == np.int64 and got[2].tolist() == steps
        np.testing.assert_array_equal(got[3], values)
    if names <= 256 and steps and max(steps) - min(steps) < 2**32:
        assert len(blob) < len(old)


def test_an_empty_state_reports_every_view():
    report = dx.report(dx.new_state())
    assert report["barrel"]["bounding"] is None and report["barrel"]["chart"]["step_s"] == []
    assert report["mismatch"]["attributed_to"] is None and not report["signal"]["flagged"]
    assert report["scorecard"]["goodput"] is None


def test_the_recipes_own_staleness_split_replaces_the_per_step_proxy():
    s = np.arange(20, dtype=np.int64)
    data = {
        "mismatch/engine_kl": (s, np.full(20, 1e-6)),
        "mismatch/lag_kl": (s, np.full(20, 1e-4)),
        "offpolicy/staleness_mean": (s, np.full(20, 1.0)),
        "mismatch/staleness_1/engine_kl": (s, np.full(20, 2e-6)),
        "mismatch/staleness_1/lag_kl": (s, np.full(20, 3e-4)),
    }
    by = dx.mismatch_view(fold_in_batches(data))["by_staleness"]
    assert len(by) == 1 and by[0]["reported"] and by[0]["steps"] == 20
    assert abs(by[0]["lag_kl"] - 3e-4) < 1e-15 and abs(by[0]["engine_kl"] - 2e-6) < 1e-15


@pytest.mark.parametrize("kept_n", [0, 3, 12, 80])
@pytest.mark.parametrize("inclusive", [False, True])
def test_trailing_median_and_mad_match_the_window_computed_point_by_point(kept_n: int, inclusive: bool) -> None:
    rng = np.random.default_rng(kept_n)
    kept, new = rng.random(kept_n), rng.random(70)
    size, least = 20, 5
    medians, mads = dx.trailing_median_mad(kept, new, size, least, inclusive=inclusive)
    history = list(kept[-size:])
    for i, value in enumerate(new):
        window = np.asarray(([*history, value] if inclusive else history)[-size:])
        if len(window) < least:
            assert np.isnan(medians[i]) and np.isnan(mads[i])
        else:
            assert medians[i] == np.median(window)
            assert mads[i] == np.median(np.abs(window - np.median(window)))
        history.append(value)


REWARD_BOUND = dict(SYNC_TRAINER_BOUND, **{"time/reward_s": 12.0, "idle/trainer_wait_s": 12.2, "time/step_s": 19.0})


def test_group_barrel_names_the_stave_bounding_most_runs_and_averages_the_shares():
    train_bound = dx.barrel_view(fold_in_batches(_series(SYNC_TRAINER_BOUND)))
    slow_train = dx.barrel_view(fold_in_batches(_series(SYNC_TRAINER_BOUND | {"time/train_s": 8.0})))
    reward_bound = dx.barrel_view(fold_in_batches(_series(REWARD_BOUND)))
    empty = dx.barrel_view(dx.new_state())
    assert (train_bound["bounding"], slow_train["bounding"], reward_bound["bounding"]) == ("train", "train", "reward")

    group = dx.group_barrel([train_bound, empty, reward_bound, slow_train])
    assert group["bounding"] == "train" and group["bounded_runs"] == 2
    assert (group["runs"], group["runs_without_staves"]) == (3, 1)
    staves = {s["name"]: s for s in group["staves"]}
    assert [s["name"] for s in group["staves"]] == [
        "rollout",
        "reward",
        "old_logprob",
        "train",
        "weight_sync",
        "trainer_wait",
    ]
    assert {name: s["bounds"] for name, s in staves.items() if s["bounds"]} == {"train": 2, "reward": 1}
    train = staves["train"]
    # The slow-train run's step stays 9 s but its serial part (0.5 + 8 + 0.3 + 2.2) is 11 s.
    assert train["runs"] == 3
    assert train["mean_share"] == pytest.approx((6 / 9 + 8 / 11 + 6 / 19) / 3)
    assert (train["min_share"], train["max_share"]) == (pytest.approx(6 / 19), pytest.approx(8 / 11))
    assert train["mean_s"] == pytest.approx((6 + 8 + 6) / 3)
    reward = staves["reward"]
    assert reward["mean_share"] == pytest.approx((1 / 9 + 1 / 11 + 12 / 19) / 3)
    assert reward["mean_s"] == pytest.approx((1 + 1 + 12) / 3)
    assert staves["trainer_wait"]["kind"] == "idle" and staves["trainer_wait"]["bounds"] == 0


def _view(bounding: str, **saved: float) -> dict:
    staves = [
        {"name": name, "kind": "trainer" if name == "train" else "producer", "mean_s": 1.0, "share": 0.5}
        | {"saved_if_2x_s": s}
        for name, s in saved.items()
    ]
    return {"staves": staves, "bounding": bounding}


def test_group_barrel_breaks_a_tie_by_the_larger_mean_saving_whatever_the_run_order():
    runs = [_view("train", train=0.5, reward=0.1), _view("reward", train=0.2, reward=2.0)]
    for views in (runs, runs[::-1]):
        group = dx.group_barrel(views)
        assert group["bounding"] == "reward" and group["bounded_runs"] == 1
        saved = {s["name"]: s["mean_saved_if_2x_s"] for s in group["staves"]}
        assert saved == {"reward": pytest.approx(1.05), "train": pytest.approx(0.35)}


def test_group_barrel_of_runs_without_staves_has_no_bounding_stave():
    group = dx.group_barrel([dx.barrel_view(dx.new_state())] * 2)
    assert group == {"runs": 0, "runs_without_staves": 2, "bounding": None, "bounded_runs": 0, "staves": []}
    assert dx.group_barrel([])["runs_without_staves"] == 0


@pytest.mark.parametrize("size", [1, 2, 7, 50, 51])
def test_window_medians_are_np_medians_of_every_window(size: int) -> None:
    rng = np.random.default_rng(size)
    # Ties and a constant stretch: a rank filter must order equal values as a sort does.
    x = np.concatenate([rng.random(120), np.full(size + 3, 0.5), rng.integers(0, 4, 90).astype(float)])
    want = np.median(np.lib.stride_tricks.sliding_window_view(x, size), axis=1)
    assert np.array_equal(dx._window_medians(x, size), want)
    # NaN makes its windows' medians NaN, as np.median does.
    x[10] = np.nan
    got = dx._window_medians(x, size)
    want = np.median(np.lib.stride_tricks.sliding_window_view(x, size), axis=1)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(got[~np.isnan(got)], want[~np.isnan(want)])
