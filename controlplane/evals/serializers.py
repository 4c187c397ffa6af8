from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from controlplane.api import InputSerializer, max_length
from controlplane.checkpoints.serializers import CheckpointSerializer
from controlplane.evals.models import Candidate, Choice, Eval, EvalPrompt, EvalSet, EvalStatus, Generation
from controlplane.evals.selectors import evals_progress
from controlplane.runs.serializers import ProjectRefField
from controlplane.teams.models import Team
from controlplane.teams.serializers import ProjectSerializer, TeamRefSerializer

MAX_JSONL = 64 * 1024 * 1024
MAX_GENERATIONS_PER_BATCH = 500  # contract B
MAX_GENERATED_TEXT = 262_144


class EvalPromptSerializer(serializers.ModelSerializer[EvalPrompt]):
    class Meta:
        model = EvalPrompt
        fields = ["id", "position", "text", "reference", "tags"]


class EvalSetSerializer(serializers.ModelSerializer[EvalSet]):
    team = TeamRefSerializer(read_only=True)
    created_by = serializers.CharField(source="created_by.username", read_only=True)
    prompt_count = serializers.SerializerMethodField()

    class Meta:
        model = EvalSet
        fields = ["id", "team", "name", "description", "guidelines", "prompt_count", "created_by", "created_at"]

    def get_prompt_count(self, eval_set: EvalSet) -> int:
        return eval_set.prompts.count()


class EvalSetDetailSerializer(EvalSetSerializer):
    prompts = serializers.SerializerMethodField()

    class Meta(EvalSetSerializer.Meta):
        fields = [*EvalSetSerializer.Meta.fields, "prompts"]

    @extend_schema_field(EvalPromptSerializer(many=True))
    def get_prompts(self, eval_set: EvalSet) -> Any:
        return EvalPromptSerializer(eval_set.prompts.order_by("position"), many=True).data


_JSONL_HELP = 'One JSON object a line: {"prompt": str, "reference"?: str, "tags"?: [str]}.'


class EvalSetCreateSerializer(InputSerializer):
    team = serializers.SlugField(max_length=max_length(Team, "slug"), help_text="Team slug.")
    name = serializers.CharField(max_length=max_length(EvalSet, "name"))
    description = serializers.CharField(required=False, allow_blank=True, default="", max_length=10_000)
    guidelines = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=10_000, help_text="What voters are asked to judge."
    )
    jsonl = serializers.CharField(
        required=False, allow_blank=True, default="", trim_whitespace=False, max_length=MAX_JSONL, help_text=_JSONL_HELP
    )


class EvalSetImportSerializer(InputSerializer):
    jsonl = serializers.CharField(trim_whitespace=False, max_length=MAX_JSONL, help_text=_JSONL_HELP)


class ImportedSerializer(serializers.Serializer[Any]):
    imported = serializers.IntegerField(help_text="Prompts added by this import.")
    prompt_count = serializers.IntegerField(help_text="Prompts in the set now.")


class ExternalCandidateSerializer(InputSerializer):
    uri = serializers.CharField(max_length=max_length(Candidate, "uri"), help_text="A Hugging Face model directory.")
    # A declared field, popped from the class by DRF's metaclass: it does not shadow Field.label.
    label = serializers.CharField(max_length=max_length(Candidate, "label"))  # type: ignore[assignment]


class GenerationOptionsSerializer(InputSerializer):
    max_new_tokens = serializers.IntegerField(required=False, min_value=1, max_value=4096)
    temperature = serializers.FloatField(required=False, min_value=0.0, max_value=2.0)
    seed = serializers.IntegerField(required=False, min_value=0, max_value=2**31 - 1)
    engine = serializers.ChoiceField(required=False, choices=["auto", "torch", "vllm"])
    device = serializers.ChoiceField(required=False, choices=["auto", "cpu", "cuda"])


class EvalCreateSerializer(InputSerializer):
    project = ProjectRefField(help_text="Project id, or 'team-slug/project-name' (created if missing).")
    name = serializers.CharField(max_length=max_length(Eval, "name"))
    eval_set = serializers.IntegerField(min_value=1, help_text="An eval set of the project's team.")
    checkpoints = serializers.ListField(
        child=serializers.IntegerField(min_value=1), required=False, default=list, max_length=64,
        help_text="Checkpoint ids of the team's runs.",
    )  # fmt: skip
    # DRF passes max_length to the ListSerializer; the stubs do not know it.
    external = ExternalCandidateSerializer(many=True, required=False, default=list, max_length=64)  # type: ignore[call-arg]
    samples_per_prompt = serializers.IntegerField(required=False, default=1, min_value=1, max_value=8)
    min_voters_per_prompt = serializers.IntegerField(
        required=False, default=1, min_value=1, max_value=100,
        help_text="Voters each prompt gets before battles go where they reduce the ranking's uncertainty most.",
    )  # fmt: skip
    generation = GenerationOptionsSerializer(required=False)


class ProgressSerializer(serializers.Serializer[Any]):
    generations = serializers.IntegerField(help_text="Responses stored so far.")
    expected = serializers.IntegerField(help_text="Candidates x prompts x samples.")
    battles = serializers.IntegerField()
    votes = serializers.IntegerField()
    prompts = serializers.IntegerField()
    prompts_covered = serializers.IntegerField(help_text="Prompts with at least min_voters_per_prompt voters.")


class EvalSerializer(serializers.ModelSerializer[Eval]):
    project = ProjectSerializer(read_only=True)
    eval_set = serializers.IntegerField(source="eval_set_id", read_only=True)
    created_by = serializers.CharField(source="created_by.username", read_only=True)
    generation_run = serializers.IntegerField(source="generation_run_id", read_only=True, allow_null=True)
    candidates = serializers.SerializerMethodField(
        help_text="The candidates' labels, alphabetical; which response came from which is revealed per vote."
    )
    progress = serializers.SerializerMethodField()

    class Meta:
        model = Eval
        fields = [
            "id", "name", "project", "eval_set", "status", "failure_reason", "created_by", "created_at", "closed_at",
            "samples_per_prompt", "min_voters_per_prompt", "generation_run", "candidates", "progress",
        ]  # fmt: skip

    def get_candidates(self, evaluation: Eval) -> list[str]:
        return sorted(candidate.label for candidate in evaluation.candidates.all())  # prefetched by lists

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, evaluation: Eval) -> dict[str, int]:
        # A list passes the whole page's progress, read at once (selectors.evals_progress).
        progress = self.context.get("progress") or evals_progress([evaluation])
        return progress[evaluation.id]


class BattlePromptSerializer(serializers.Serializer[Any]):
    text = serializers.CharField()
    reference = serializers.CharField()


class BattleSerializer(serializers.Serializer[Any]):
    battle = serializers.UUIDField()
    prompt = BattlePromptSerializer()
    a = serializers.CharField(help_text="The response shown as A.")
    b = serializers.CharField(help_text="The response shown as B.")
    guidelines = serializers.CharField()


class SideSerializer(serializers.Serializer[Any]):
    label = serializers.CharField()  # type: ignore[assignment]  # a declared field, as above
    run = serializers.IntegerField(allow_null=True, help_text="The checkpoint's run; null for an outside model.")
    step = serializers.IntegerField(allow_null=True)


class RevealSerializer(serializers.Serializer[Any]):
    a = SideSerializer()
    b = SideSerializer()


class VoteInSerializer(InputSerializer):
    choice = serializers.ChoiceField(choices=Choice.choices, help_text="As you saw the sides: A, B, tie, both bad.")
    comment = serializers.CharField(required=False, allow_blank=True, default="", max_length=1000)


class VoteOutSerializer(serializers.Serializer[Any]):
    choice = serializers.ChoiceField(choices=Choice.choices, help_text="As you saw the sides.")
    comment = serializers.CharField()
    created_at = serializers.DateTimeField()


class BattleDetailSerializer(BattleSerializer):
    vote = VoteOutSerializer(allow_null=True, help_text="Your vote; null before you voted.")
    reveal = RevealSerializer(allow_null=True, help_text="Who answered which side; null before you voted.")


class VoteResultSerializer(serializers.Serializer[Any]):
    battle = serializers.UUIDField()
    vote = VoteOutSerializer()
    reveal = RevealSerializer()


class RankingRowSerializer(serializers.Serializer[Any]):
    label = serializers.CharField()  # type: ignore[assignment]  # a declared field, as above
    score = serializers.FloatField(allow_null=True, help_text="Arena's scale: 1000 + 400 x log10 strength.")
    ci_low = serializers.FloatField(allow_null=True, help_text="2.5 % bootstrap percentile.")
    ci_high = serializers.FloatField(allow_null=True, help_text="97.5 % bootstrap percentile.")
    rank = serializers.IntegerField(allow_null=True, help_text="1 + candidates surely better (intervals apart).")
    battles = serializers.IntegerField(help_text="Votes the candidate took part in.")


class LengthControlledSerializer(serializers.Serializer[Any]):
    votes = serializers.IntegerField(
        help_text="The votes this view was fitted on. It is refitted after the ranking (it is the slow part), so "
        "during a burst of votes it may trail the ranking's `votes`; it never claims votes it has not seen."
    )
    beta = serializers.FloatField(
        allow_null=True,
        help_text="How much the voters favour the longer response: log10 odds per standard deviation of the "
        "relative length difference (len_a - len_b) / (len_a + len_b + 1) over the votes, penalised as Arena's "
        "style control (0: not at all; Arena points: x 400); null before the first vote.",
    )
    rows = RankingRowSerializer(
        many=True, help_text="The ranking with that preference taken out, best first; the same fields as `rows`."
    )


class RankingSerializer(serializers.Serializer[Any]):
    rows = RankingRowSerializer(many=True)
    labels = serializers.ListField(child=serializers.CharField(), help_text="The win-rate matrix's order.")
    win_rate = serializers.ListField(
        child=serializers.ListField(child=serializers.FloatField(allow_null=True)),
        help_text="win_rate[i][j]: the share of the score of labels[i] against labels[j]; null where they never met.",
    )
    votes = serializers.IntegerField()
    alpha = serializers.FloatField(allow_null=True, help_text="Krippendorff's alpha of the voters' agreement.")
    flagged_voters = serializers.ListField(
        child=serializers.CharField(),
        allow_null=True,
        help_text="Voters who vote unlike the rest; null unless you created the eval or admin its team.",
    )
    length_controlled = LengthControlledSerializer(
        allow_null=True,
        help_text="Length-controlled scores: Bradley-Terry with the sides' token counts as a covariate "
        "(Arena's style control, f = (len_a - len_b) / (len_a + len_b + 1)), so a candidate that wins votes by "
        "writing more does not rank for it. Computed in the background after each vote; null until first "
        "computed, and from `length_controlled.votes` votes, which may trail `votes` for a few seconds.",
    )


class GenerationSerializer(serializers.ModelSerializer[Generation]):
    candidate = serializers.CharField(source="candidate.label", read_only=True)
    prompt = serializers.IntegerField(source="prompt_id", read_only=True)

    class Meta:
        model = Generation
        fields = ["id", "candidate", "prompt", "sample", "text", "tokens"]


class GenerationInSerializer(InputSerializer):
    candidate = serializers.CharField(max_length=64, help_text="The candidate's key in the run's config.")
    prompt = serializers.IntegerField(min_value=1)
    sample = serializers.IntegerField(min_value=0, max_value=7)
    text = serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=MAX_GENERATED_TEXT)
    tokens = serializers.IntegerField(min_value=0, max_value=1_000_000)


class GenerationBatchSerializer(InputSerializer):
    generations = GenerationInSerializer(many=True, allow_empty=False, max_length=MAX_GENERATIONS_PER_BATCH)  # type: ignore[call-arg]


class AcceptedSerializer(serializers.Serializer[Any]):
    accepted = serializers.IntegerField()


class HumanScoreSerializer(serializers.Serializer[Any]):
    eval = serializers.IntegerField(
        help_text="The eval the score comes from (scores of different evals do not compare)."
    )
    score = serializers.FloatField(allow_null=True, help_text="Arena's scale: 1000 + 400 x log10 strength.")
    ci_low = serializers.FloatField(allow_null=True, help_text="2.5 % bootstrap percentile.")
    ci_high = serializers.FloatField(allow_null=True, help_text="97.5 % bootstrap percentile.")
    rank = serializers.IntegerField(allow_null=True, help_text="1 + candidates surely better (intervals apart).")
    battles = serializers.IntegerField(help_text="Votes the checkpoint took part in.")


class RunCheckpointSerializer(CheckpointSerializer):
    """A checkpoint with what people and the reward made of it (GET /runs/{id}/checkpoints)."""

    human = HumanScoreSerializer(
        read_only=True,
        allow_null=True,
        help_text="Its score in the eval of /runs/{id}/human-eval; null when no eval you can see ranked it.",
    )
    proxy_reward = serializers.FloatField(
        read_only=True,
        allow_null=True,
        help_text="Mean of reward/mean over the second half of the steps since the previous checkpoint.",
    )

    class Meta(CheckpointSerializer.Meta):
        fields = [*CheckpointSerializer.Meta.fields, "human", "proxy_reward"]
        read_only_fields = [*CheckpointSerializer.Meta.read_only_fields, "human", "proxy_reward"]


class EvalRefSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()
    status = serializers.ChoiceField(choices=EvalStatus.choices)


class CheckpointScoreSerializer(serializers.Serializer[Any]):
    checkpoint = serializers.IntegerField()
    step = serializers.IntegerField()
    label = serializers.CharField()  # type: ignore[assignment]  # a declared field, as above
    score = serializers.FloatField(allow_null=True)
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)
    rank = serializers.IntegerField(allow_null=True)
    battles = serializers.IntegerField()
    proxy_reward = serializers.FloatField(allow_null=True)


class HackingWarningSerializer(serializers.Serializer[Any]):
    earlier = CheckpointScoreSerializer()
    later = CheckpointScoreSerializer()
    score_drop = serializers.FloatField(help_text="The earlier checkpoint's score minus the later's.")
    drop_low = serializers.FloatField(help_text="Lower end of the drop's corrected 95 % interval (above 0).")
    drop_high = serializers.FloatField(help_text="Upper end of the drop's corrected 95 % interval.")
    reward_rise = serializers.FloatField(help_text="The later checkpoint's proxy reward minus the earlier's.")
    pairs = serializers.IntegerField(
        help_text="Pairs of checkpoints over which the reward rose, each a test: the 5 % level and the "
        "interval are corrected for them (Bonferroni)."
    )
    message = serializers.CharField()


class RunHumanEvalSerializer(serializers.Serializer[Any]):
    eval = EvalRefSerializer(
        allow_null=True,
        source="evaluation",
        help_text="Of the evals you can see that ranked this run's checkpoints, the one that ranked most of them.",
    )
    votes = serializers.IntegerField()
    checkpoints = CheckpointScoreSerializer(many=True, help_text="Ascending step.")
    warning = HackingWarningSerializer(
        allow_null=True,
        help_text="Set when the proxy reward rose between two checkpoints while the human score fell "
        "significantly (5 %, corrected for the pairs compared): the reward may be hacked.",
    )
