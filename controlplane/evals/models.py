"""Eval sets and their prompts; evals, their candidates, generations, battles, servings and votes.

Blindness is held by the ids: generations and battles are uuid4 and a candidate's key is a
random token, so nothing a voter sees before voting names the model behind a response.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q
from django.utils import timezone

from controlplane.checkpoints.models import Checkpoint
from controlplane.runs.models import Run
from controlplane.teams.models import Project, Team

MAX_PROMPT = 20_000  # GenerateConfig's bound on a prompt's text
MAX_PROMPTS = 5_000  # GenerateConfig's bound on the prompts of one run


class EvalSet(models.Model):
    """Prompts a team evaluates its models on, with the guidelines voters read."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="eval_sets")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True, default="")
    guidelines = models.TextField(blank=True, default="")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="evalset_team_name_unique")]


class EvalPrompt(models.Model):
    eval_set = models.ForeignKey(EvalSet, on_delete=models.CASCADE, related_name="prompts")
    position = models.PositiveIntegerField()
    text = models.TextField()
    reference = models.TextField(blank=True, default="")
    tags = ArrayField(models.CharField(max_length=64), default=list, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["eval_set", "position"], name="evalprompt_set_position_unique")]


class EvalStatus(models.TextChoices):
    GENERATING = "GENERATING"
    OPEN = "OPEN"
    CLOSED = "CLOSED"
    FAILED = "FAILED"


class Eval(models.Model):
    """Candidates answer an eval set's prompts (one `generate` run), then people vote in battles."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="evals")
    name = models.CharField(max_length=200)
    eval_set = models.ForeignKey(EvalSet, on_delete=models.PROTECT, related_name="evals")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=16, choices=EvalStatus.choices, default=EvalStatus.GENERATING)
    failure_reason = models.TextField(blank=True, default="")
    samples_per_prompt = models.PositiveSmallIntegerField(default=1)
    min_voters_per_prompt = models.PositiveSmallIntegerField(default=1)
    generation_run = models.ForeignKey(Run, on_delete=models.SET_NULL, null=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status"], name="eval_status")]


class Candidate(models.Model):
    """A model in an eval: a Barrel checkpoint (run and step known) or a directory from outside."""

    eval = models.ForeignKey(Eval, on_delete=models.CASCADE, related_name="candidates")
    key = models.CharField(max_length=64)  # random token: what the generation run calls it
    checkpoint = models.ForeignKey(Checkpoint, on_delete=models.SET_NULL, null=True, related_name="+")
    uri = models.CharField(max_length=1000)
    label = models.CharField(max_length=200)
    run = models.ForeignKey(Run, on_delete=models.SET_NULL, null=True, related_name="+")
    step = models.BigIntegerField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["eval", "key"], name="candidate_eval_key_unique"),
            models.UniqueConstraint(fields=["eval", "label"], name="candidate_eval_label_unique"),
        ]


class Generation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    eval = models.ForeignKey(Eval, on_delete=models.CASCADE, related_name="generations")
    candidate = models.ForeignKey(Candidate, on_delete=models.CASCADE, related_name="generations")
    prompt = models.ForeignKey(EvalPrompt, on_delete=models.CASCADE, related_name="+")
    sample = models.PositiveSmallIntegerField()
    text = models.TextField()
    tokens = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["candidate", "prompt", "sample"], name="generation_candidate_prompt_sample")
        ]


class Battle(models.Model):
    """Two responses of different candidates to one prompt, in a stored orientation (a, b)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    eval = models.ForeignKey(Eval, on_delete=models.CASCADE, related_name="battles")
    prompt = models.ForeignKey(EvalPrompt, on_delete=models.CASCADE, related_name="+")
    generation_a = models.ForeignKey(Generation, on_delete=models.CASCADE, related_name="+")
    generation_b = models.ForeignKey(Generation, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["generation_a", "generation_b"], name="battle_generations_unique")
        ]


class Serving(models.Model):
    """A battle shown to one voter; `swapped`: they see the stored b as A (sides are random per voter)."""

    battle = models.ForeignKey(Battle, on_delete=models.CASCADE, related_name="servings")
    voter = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    swapped = models.BooleanField()
    # None: reserved as the voter's next battle (pick.battle_prepare), not shown yet; it exists for
    # them only once battles/next hands it out.
    served_at = models.DateTimeField(null=True, default=timezone.now)
    # A reservation's battles/next body (JSON), prepared with it so that handing it out is one
    # statement (evals/prepared.py); empty once shown, or when none was prepared.
    body = models.TextField(blank=True, default="")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["battle", "voter"], name="serving_battle_voter_unique")]
        indexes = [
            models.Index(fields=["voter"], condition=Q(served_at__isnull=True), name="serving_reserved"),
        ]


class Choice(models.TextChoices):
    A = "a"
    B = "b"
    TIE = "tie"
    BOTH_BAD = "both_bad"


class Vote(models.Model):
    """A voter's verdict on a battle, in the battle's stored orientation."""

    battle = models.ForeignKey(Battle, on_delete=models.CASCADE, related_name="votes")
    voter = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    choice = models.CharField(max_length=8, choices=Choice.choices)
    comment = models.CharField(max_length=1000, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["battle", "voter"], name="vote_battle_voter_unique")]


class RankingSnapshot(models.Model):
    """The last ranking computed for an eval: a cache, derived from its votes and rebuilt at will.

    A row here rather than an entry in Django's Redis cache: the length-controlled fit behind
    it costs seconds (about 5 s at 50 candidates and 20,000 votes), and a Redis that restarts
    empty, or evicts under memory pressure, would leave every open eval without it until its
    next vote; the row also makes "store only if newer" one locked read-compare-write. It is
    keyed by the votes it was computed from, (`votes`, `last_vote`): votes are only added, so
    the count and the highest id change with every vote that commits, even one whose id is
    lower than a vote already seen (ids are drawn before commit). A snapshot is served as
    current only while that key is the eval's; otherwise it is recomputed.
    """

    eval = models.OneToOneField(Eval, on_delete=models.CASCADE, primary_key=True, related_name="+")
    votes = models.PositiveIntegerField()
    last_vote = models.BigIntegerField()  # the highest vote id; 0 before the first vote
    # ranking.EvalRanking's fields; its scores are where the next refresh starts its fit. Its
    # flagged_voters are not read: the task computes them with the analysis, below.
    ranking = models.JSONField()
    computed_at = models.DateTimeField()
    # The slow part, the analysis: the length-controlled view and the outlier test's flagged
    # voters (usernames; only the eval's managers see them). Keyed the same way, but computed
    # after the ranking is pushed: during a burst it may trail the ranking by a few votes.
    analysis_votes = models.PositiveIntegerField(null=True)
    analysis_last_vote = models.BigIntegerField(null=True)
    analysis_at = models.DateTimeField(null=True)
    length_controlled = models.JSONField(null=True)
    flagged_voters = models.JSONField(null=True)
