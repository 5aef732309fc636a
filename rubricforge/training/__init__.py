"""TRL integration (DeepRubric §3.3, §4.1 "Tool environment", App. B, App. D; MindDR §5.4).

* :mod:`~rubricforge.training.grpo` — ``rubricforge train grpo``: GRPOTrainer with tool-using rollouts;
* :mod:`~rubricforge.training.score` — ``rubricforge train score``: SCORE's shared writer / evaluator self-play;
* :mod:`~rubricforge.training.rewards` — the reward function handed to TRL, with per-step metrics;
* :mod:`~rubricforge.training.presets` — the paper's and a small GPU's hyperparameters, loss types;
* :mod:`~rubricforge.training.model` — the policy's tokenizer checks, GGUF conversion;
* :mod:`~rubricforge.training.trl_seams` — every override of a private GRPOTrainer method, in one place;
* :mod:`~rubricforge.training.rollouts`, :mod:`~rubricforge.training.sft` — the policy model that samples
  trajectories (the sampling itself is a job, :mod:`~rubricforge.jobs.rollouts`, as are the DPO preference
  pairs, :mod:`~rubricforge.jobs.dpo_pairs`), the cold-start SFT stage.

The agent itself (prompt, tasks, tool environments, episodes) is :mod:`rubricforge.agent`. Each `train` command runs
as a job (:mod:`rubricforge.jobs.train`: run directory, resume rule, budget stop). Only the CLI and the jobs import
from here; torch, transformers, trl and datasets are imported inside functions.
"""
