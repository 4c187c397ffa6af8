"""A small GRPO run with TRL's own GRPOTrainer, on CPU, with nothing downloaded.

Submitted as a Barrel command run, it needs no Barrel code to report: `report_to="mlflow"` makes
TRL's MLflow callback log into the run from the job contract's MLFLOW_TRACKING_URI /
MLFLOW_RUN_ID / MLFLOW_TRACKING_TOKEN, and the Trainer saves `checkpoint-<step>/` folders
(Hugging Face format) in the output directory every `--save-steps` steps, which the command
recipe's watcher registers with their steps when the output directory is the run's
checkpoint_dir:

    barrel submit --project lab/trl --working-dir examples/trl_grpo --checkpoint-dir out \
      --command "python train.py --steps 20" --pip trl==1.16.0

(`--pip` where the cluster's Python lacks TRL; Barrel's own dev environment has it.) The model is
any local causal LM folder (model and tokenizer saved with save_pretrained, `--model`); without
one, a tiny Llama with a character tokenizer is built once and kept in ~/.cache/barrel/models
(Barrel's workers.models.tiny). The prompts are made in memory, and the policy is rewarded for
answering with digits, so the reward moves within a handful of steps. Each option can also be
given as an environment variable: TRL_MODEL, TRL_OUTPUT_DIR, TRL_STEPS, TRL_SAVE_STEPS,
TRL_STEP_SLEEP_S.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

PROMPTS = ["1+1=", "2+3=", "4+4=", "7-2=", "3*3=", "9-5=", "6+1=", "8-8="]


def digit_reward(completions: list[str], **_: object) -> list[float]:
    """The share of a completion's characters that are digits: a reward a tiny model can learn."""
    return [sum(ch.isdigit() for ch in text) / max(len(text), 1) for text in completions]


def parse_args() -> argparse.Namespace:
    env = os.environ.get
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=env("TRL_MODEL"), help="a local model directory (default: build a tiny one)")
    parser.add_argument("--output-dir", default=env("TRL_OUTPUT_DIR", "out"))
    parser.add_argument("--steps", type=int, default=int(env("TRL_STEPS", "4")))
    parser.add_argument("--save-steps", type=int, default=int(env("TRL_SAVE_STEPS", "2")))
    parser.add_argument(
        "--step-sleep-s",
        type=float,
        default=float(env("TRL_STEP_SLEEP_S", "0")),
        help="pause after each step (to give a demonstration, or a cancel, time to act)",
    )
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    # Offline: a hub lookup would hang or fail on a machine with no network.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    output_dir = Path(args.output_dir)
    model = args.model
    if model is None:
        from workers.models.tiny import ensure_tiny_model

        model = str(ensure_tiny_model())

    class StepSleep(TrainerCallback):  # type: ignore[misc]  # transformers is untyped here
        def on_step_end(self, *_: object, **__: object) -> None:
            time.sleep(args.step_sleep_s)

    config = GRPOConfig(
        output_dir=str(output_dir),
        max_steps=args.steps,
        save_steps=args.save_steps,
        save_strategy="steps",
        save_only_model=True,  # the model and tokenizer, without the optimizer's state: small
        logging_steps=1,
        report_to=["mlflow"],
        use_cpu=True,
        bf16=False,
        learning_rate=1e-3,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=8,
        temperature=1.0,
        seed=0,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=digit_reward,
        args=config,
        train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
        callbacks=[StepSleep()] if args.step_sleep_s > 0 else None,
    )
    trainer.train()
    print(f"trained {args.steps} steps; checkpoints in {output_dir}")


if __name__ == "__main__":
    main()
