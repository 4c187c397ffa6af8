/**
 * The smoke and grpo recipes' config schemas as GET /api/v1/recipes serves them (pydantic v2's
 * `model_json_schema()`), grpo trimmed to the fields that show each shape the form handles:
 * `$ref` sections, a nested section (model.tiny), `anyOf` with null, an enum, a `const`, a list
 * of enum values and a map of numbers without a schema default (pydantic default_factory).
 * Snapshot of workers/recipes/{smoke,grpo}/config.py.
 */
import type { JsonSchema } from "./schemaForm";

export const SMOKE_SCHEMA: JsonSchema = {
  additionalProperties: false,
  description: "A few Ray tasks per step that report metrics: proves the loop before a real recipe.",
  properties: {
    seed: {
      anyOf: [
        {
          maximum: 2147483647,
          minimum: 0,
          type: "integer",
        },
        {
          type: "null",
        },
      ],
      default: null,
      description: "Random seed. When omitted, the control plane picks one and records it on the attempt.",
      title: "Seed",
    },
    steps: {
      default: 20,
      description: "Number of steps to run.",
      maximum: 1000000,
      minimum: 1,
      title: "Steps",
      type: "integer",
    },
    interval_s: {
      default: 0.2,
      description: "Sleep between steps, seconds.",
      maximum: 3600.0,
      minimum: 0.0,
      title: "Interval S",
      type: "number",
    },
    tasks_per_step: {
      default: 2,
      description: "Ray tasks launched per step.",
      maximum: 64,
      minimum: 1,
      title: "Tasks Per Step",
      type: "integer",
    },
    task_cpus: {
      default: 1.0,
      description: "CPUs each task asks Ray for (num_cpus); tasks wait while the cluster has fewer free.",
      maximum: 1024.0,
      minimum: 0.0,
      title: "Task Cpus",
      type: "number",
    },
    fail_at_step: {
      anyOf: [
        {
          minimum: 0,
          type: "integer",
        },
        {
          type: "null",
        },
      ],
      default: null,
      description: "Raise an error at this step, to exercise failure handling.",
      title: "Fail At Step",
    },
  },
  title: "SmokeConfig",
  type: "object",
};

export const GRPO_SCHEMA: JsonSchema = {
  $defs: {
    AlgorithmConfig: {
      additionalProperties: false,
      properties: {
        lr: {
          default: 0.0005,
          description: "AdamW learning rate.",
          exclusiveMinimum: 0.0,
          maximum: 1.0,
          title: "Lr",
          type: "number",
        },
        group_size: {
          default: 8,
          description: "Responses per prompt; advantages are normalised in the group.",
          maximum: 1024,
          minimum: 2,
          title: "Group Size",
          type: "integer",
        },
        clip_eps: {
          default: 0.2,
          description: "PPO clip range: ratios outside 1±clip_eps are clipped.",
          exclusiveMinimum: 0.0,
          maximum: 10.0,
          title: "Clip Eps",
          type: "number",
        },
        reference: {
          default: true,
          description: "Keep a reference policy actor and report policy/kl_ref.",
          title: "Reference",
          type: "boolean",
        },
        tis_cap: {
          anyOf: [
            {
              exclusiveMinimum: 0.0,
              type: "number",
            },
            {
              type: "null",
            },
          ],
          default: 2.0,
          description: "Truncated importance sampling: weight each token by min(π_old/μ_engine, tis_cap); null turns it off.",
          title: "Tis Cap",
        },
        mode: {
          default: "sync",
          description: "sync: on-policy, rollout waits for weights; async: rollout runs ahead by up to max_staleness.",
          enum: [
            "sync",
            "async",
          ],
          title: "Mode",
          type: "string",
        },
        async_buffer_prompts: {
          anyOf: [
            {
              minimum: 1,
              type: "integer",
            },
            {
              type: "null",
            },
          ],
          default: null,
          description: "async: prompts kept in flight (default: twice prompts_per_step).",
          title: "Async Buffer Prompts",
        },
      },
      title: "AlgorithmConfig",
      type: "object",
    },
    ModelConfig: {
      additionalProperties: false,
      properties: {
        path: {
          anyOf: [
            {
              type: "string",
            },
            {
              type: "null",
            },
          ],
          default: null,
          description: "A local Hugging Face-format model directory, visible to every Ray node. When omitted, a tiny Llama and character tokenizer are built locally from `tiny`.",
          title: "Path",
        },
        tiny: {
          $ref: "#/$defs/TinyModelConfig",
        },
      },
      title: "ModelConfig",
      type: "object",
    },
    TinyModelConfig: {
      additionalProperties: false,
      properties: {
        hidden_size: {
          default: 64,
          description: "Width of the tiny Llama built when no path is given.",
          maximum: 4096,
          minimum: 8,
          title: "Hidden Size",
          type: "integer",
        },
        heads: {
          default: 4,
          description: "Attention heads (must divide hidden_size).",
          maximum: 64,
          minimum: 1,
          title: "Heads",
          type: "integer",
        },
      },
      title: "TinyModelConfig",
      type: "object",
    },
    TaskConfig: {
      additionalProperties: false,
      properties: {
        name: {
          const: "arithmetic",
          default: "arithmetic",
          description: "Task with a verifiable reward.",
          title: "Name",
          type: "string",
        },
        digits: {
          default: 2,
          description: "Digits per operand.",
          maximum: 6,
          minimum: 1,
          title: "Digits",
          type: "integer",
        },
        ops: {
          description: "Operators drawn from.",
          items: {
            enum: [
              "+",
              "-",
              "*",
            ],
            type: "string",
          },
          minItems: 1,
          title: "Ops",
          type: "array",
        },
      },
      title: "TaskConfig",
      type: "object",
    },
    RewardConfig: {
      additionalProperties: false,
      properties: {
        weights: {
          additionalProperties: {
            type: "number",
          },
          description: "Weight of each reward function in the reward; every function is reported as reward/<name>/mean.",
          title: "Weights",
          type: "object",
        },
      },
      title: "RewardConfig",
      type: "object",
    },
  },
  additionalProperties: false,
  description: "GRPO with PPO clipping on Ray: rollout, reward, trainer and reference actors.",
  properties: {
    seed: {
      anyOf: [
        {
          maximum: 2147483647,
          minimum: 0,
          type: "integer",
        },
        {
          type: "null",
        },
      ],
      default: null,
      description: "Random seed. When omitted, the control plane picks one and records it on the attempt.",
      title: "Seed",
    },
    steps: {
      default: 60,
      description: "RL steps (optimizer updates of the policy).",
      maximum: 10000000,
      minimum: 1,
      title: "Steps",
      type: "integer",
    },
    model: {
      $ref: "#/$defs/ModelConfig",
    },
    task: {
      $ref: "#/$defs/TaskConfig",
    },
    reward: {
      $ref: "#/$defs/RewardConfig",
    },
    algorithm: {
      $ref: "#/$defs/AlgorithmConfig",
    },
    trainer_device: {
      default: "auto",
      description: "Where the trainer and the reference policy compute. cuda reserves trainer_num_gpus Ray GPUs for them (the run fails at start when the cluster lacks them); auto does so when the cluster has that many GPUs beside the rollout's, else computes on CPU.",
      enum: [
        "auto",
        "cpu",
        "cuda",
      ],
      title: "Trainer Device",
      type: "string",
    },
    fail_at_step: {
      anyOf: [
        {
          minimum: 0,
          type: "integer",
        },
        {
          type: "null",
        },
      ],
      default: null,
      description: "Raise at the start of this step (for testing failure handling); a resumed attempt does not.",
      title: "Fail At Step",
    },
  },
  title: "GRPOConfig",
  type: "object",
};

/** The command recipe's schema as GET /recipes serves it (pydantic's, x-ui hints included). */
export const COMMAND_SCHEMA: JsonSchema = {
  "additionalProperties": false,
  "description": "Any trainer's entrypoint as a Barrel run: TRL, verl, OpenRLHF or a script of your own.",
  "properties": {
    "seed": {
      "anyOf": [
        {
          "maximum": 2147483647,
          "minimum": 0,
          "type": "integer"
        },
        {
          "type": "null"
        }
      ],
      "default": null,
      "description": "Random seed. When omitted, the control plane picks one and records it on the attempt.",
      "title": "Seed"
    },
    "command": {
      "description": "The entrypoint: a command line (split into words as a POSIX shell would, with no shell features such as pipes or $VARS: use ['bash', '-c', '...'] for those) or a list of arguments. It runs in the working directory, with the job contract's variables (BARREL_*, MLFLOW_*) in its environment, so a trainer that logs to MLflow logs into this run.",
      "items": {
        "type": "string"
      },
      "title": "Command",
      "type": "array",
      "x-ui": "command"
    },
    "env": {
      "additionalProperties": {
        "type": "string"
      },
      "description": "Environment variables of the job (at most 200). The job contract's own (BARREL_*, MLFLOW_TRACKING_*, MLFLOW_RUN_ID) cannot be set. Stored in the run's config: put secrets in the team's settings, not here.",
      "title": "Env",
      "type": "object"
    },
    "pip": {
      "description": "Requirements installed for the job by Ray's runtime_env (pip), such as 'trl==0.19.1'.",
      "items": {
        "type": "string"
      },
      "maxItems": 100,
      "title": "Pip",
      "type": "array",
      "x-ui": "lines"
    },
    "working_dir": {
      "anyOf": [
        {
          "pattern": "^sha256:[0-9a-f]{64}$",
          "type": "string"
        },
        {
          "type": "null"
        }
      ],
      "default": null,
      "description": "A working directory uploaded to the team (POST /teams/{id}/working-dirs; `barrel submit --working-dir` does it), by its content hash: the job runs in a copy of it.",
      "title": "Working Dir",
      "x-ui": "working-dir"
    },
    "cpus": {
      "default": 1.0,
      "description": "CPUs the job reserves in Ray.",
      "maximum": 1024.0,
      "minimum": 0.0,
      "title": "Cpus",
      "type": "number"
    },
    "gpus": {
      "default": 0.0,
      "description": "GPUs the job reserves in Ray.",
      "maximum": 64.0,
      "minimum": 0.0,
      "title": "Gpus",
      "type": "number"
    },
    "reserve_in_entrypoint": {
      "default": true,
      "description": "Whether the command's own process holds cpus/gpus (Ray places it on a node that has them and sets CUDA_VISIBLE_DEVICES): right for a trainer in one process (TRL, torchrun). False for one that starts its own Ray actors (verl, OpenRLHF), which reserve what they use. The scheduler counts cpus/gpus either way.",
      "title": "Reserve In Entrypoint",
      "type": "boolean"
    },
    "metrics_dir": {
      "anyOf": [
        {
          "type": "string"
        },
        {
          "type": "null"
        }
      ],
      "default": null,
      "description": "A folder of the working directory (relative, such as 'runs') where the trainer writes TensorBoard event files or JSONL metric logs (OpenRLHF, slime, verl's file logger): a watcher beside the command streams their new records into the run while it runs, and reads what is left when it ends.",
      "title": "Metrics Dir"
    },
    "metrics_format": {
      "default": "auto",
      "description": "What metrics_dir holds: 'tensorboard' (events.out.tfevents.* files), 'jsonl' (*.jsonl), or 'auto' (both).",
      "enum": [
        "auto",
        "tensorboard",
        "jsonl"
      ],
      "title": "Metrics Format",
      "type": "string"
    },
    "checkpoint_dir": {
      "anyOf": [
        {
          "type": "string"
        },
        {
          "type": "null"
        }
      ],
      "default": null,
      "description": "A folder of the working directory (relative, such as 'out') where the trainer saves Hugging Face-format checkpoints (checkpoint-<step>/ with config.json and weights): each new one is registered with its step once written. The folder is made a link to the run's folder in shared checkpoint storage ($BARREL_CHECKPOINT_DIR/run-<id>), so the checkpoints outlive the job.",
      "title": "Checkpoint Dir"
    }
  },
  "required": [
    "command"
  ],
  "title": "CommandConfig",
  "type": "object"
}
;
