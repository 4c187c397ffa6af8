from __future__ import annotations

from rest_framework import serializers

from controlplane.api import InputSerializer
from controlplane.checkpoints.models import Checkpoint, Sample

MAX_TEXT = 65_536
MAX_SAMPLES_PER_BATCH = 512


# Input too (the body of POST /runs/{id}/checkpoints, each sample of POST .../samples): InputSerializer
# refuses the fields a client could not set.
class CheckpointSerializer(InputSerializer, serializers.ModelSerializer[Checkpoint]):
    run = serializers.IntegerField(source="run_id", read_only=True)
    attempt = serializers.UUIDField(source="attempt_id", read_only=True, allow_null=True)

    class Meta:
        model = Checkpoint
        fields = ["id", "run", "attempt", "step", "uri", "weight_version", "metrics", "created_at"]
        read_only_fields = ["id", "run", "attempt", "created_at"]
        extra_kwargs = {"step": {"min_value": 0}, "weight_version": {"min_value": 0}}


class SampleSerializer(InputSerializer, serializers.ModelSerializer[Sample]):
    prompt = serializers.CharField(max_length=MAX_TEXT, allow_blank=True, trim_whitespace=False)
    response = serializers.CharField(max_length=MAX_TEXT, allow_blank=True, trim_whitespace=False)

    class Meta:
        model = Sample
        fields = [
            "id",
            "step",
            "prompt",
            "response",
            "reward",
            "prompt_tokens",
            "response_tokens",
            "weight_version",
            "extra",
            "created_at",
        ]
        read_only_fields = ["id", "created_at"]
        extra_kwargs = {
            "step": {"min_value": 0},
            "prompt_tokens": {"min_value": 0},
            "response_tokens": {"min_value": 0},
            "weight_version": {"min_value": 0},
        }


class SampleBatchSerializer(InputSerializer):
    # DRF passes max_length to the ListSerializer; the stubs do not know it.
    samples = SampleSerializer(many=True, allow_empty=False, max_length=MAX_SAMPLES_PER_BATCH)  # type: ignore[call-arg]


class RunResumeSerializer(InputSerializer):
    checkpoint = serializers.IntegerField(
        required=False, min_value=1, help_text="Checkpoint id; default: the run's latest checkpoint."
    )
