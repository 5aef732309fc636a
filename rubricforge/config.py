"""One typed configuration: defaults < YAML file < environment < command-line overrides.

Environment variables are ``RUBRICFORGE_<SECTION>__<FIELD>`` (double underscore between levels),
e.g. ``RUBRICFORGE_LLM__GENERATOR__MODEL=openai/gpt-4o-mini``, ``RUBRICFORGE_RUN_DIR=runs/x``; one that
names no config key is ignored with a warning naming the closest key. Command-line overrides are dotted
``key=value`` pairs, e.g. ``--set build.max_depth=2``; values are YAML, except that a text field keeps
the text as written (``run_dir=2024`` and ``run_dir=yes`` are folder names; quote to use YAML). The CLI's
own flags (``--run-dir``, ``--n-trees``) are typed already and reach :func:`load_config` as values. API
keys are never part of the config: a role names the environment variable that holds its key (``api_key_env``).
"""

from __future__ import annotations

import difflib
import logging
import os
import types
from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rubricforge.errors import UserError, require_file

ENV_PREFIX = "RUBRICFORGE_"
NULLS = ("null", "Null", "NULL", "~")
log = logging.getLogger(__name__)
DEFAULT_CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "rubricforge"
INDEX_ROOT = DEFAULT_CACHE_DIR / "index"  # named indexes: <INDEX_ROOT>/<name>/


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


BACKENDS = ("local", "litellm", "replay")  # the built-in LLM backends


class RoleConfig(Section):
    """How one role (generator, verifier, judge) reaches its model."""

    backend: str = "local"
    # local: an embedded model (qwen2.5-coder-1.5b-instruct-q4 | qwen2.5-coder-0.5b-instruct-q4);
    # litellm: any provider string, e.g. hosted_vllm/Qwen/Qwen3-8B; replay: recorded answers;
    # or the name of a backend plugin (entry-point group rubricforge.backends, docs/plugins.md)
    model: str = "qwen2.5-coder-1.5b-instruct-q4"
    api_base: str | None = None  # vLLM / llama.cpp / any OpenAI-compatible server
    api_key_env: str | None = None  # name of the environment variable holding the key
    temperature: float = Field(0.3, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    max_tokens: int = Field(1024, ge=1)
    seed: int | None = 0
    # reasoning models (OpenAI's o-series and GPT-5 family): low | medium | high, sent as reasoning_effort;
    # None sends nothing (the provider's default); the local backend has no such setting and ignores it
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    timeout_s: float = Field(300.0, gt=0)
    max_retries: int = Field(4, ge=0)  # transport retries: timeouts, 429, 5xx
    backoff_s: float = Field(1.0, gt=0)  # first retry pause; doubles per retry, with jitter, at most 60 s
    structured_retries: int = Field(2, ge=0)  # re-prompts with the validation error
    # how a server is asked for JSON (litellm backend): auto starts at json_schema (or what litellm knows the
    # provider takes) and steps down on a refusal; json_schema | json_object (with the schema, for a server
    # with api_base) | plain (the prompt alone; the answer is still validated) is used as set
    structured: Literal["auto", "json_schema", "json_object", "plain"] = "auto"
    concurrency: int = Field(4, ge=1)  # in-flight requests for this model
    rpm: int | None = Field(None, ge=1)  # requests per minute
    tpm: int | None = Field(None, ge=1)  # tokens per minute
    n_ctx: int = Field(8192, ge=512)  # local backend context window
    n_threads: int | None = None  # local backend threads (default: all cores)
    # local backend: llama.cpp's repacked weight buffers; None (auto): off on CPUs with AMX, where they crash
    repack: bool | None = None

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, v: str) -> str:
        from rubricforge.plugins import plugins

        if v not in BACKENDS and v not in plugins("backends"):
            raise ValueError(f"unknown backend '{v}': use {', '.join(BACKENDS)} or an installed plugin's")
        return v


class LLMConfig(Section):
    generator: RoleConfig = Field(default_factory=RoleConfig)
    verifier: RoleConfig = Field(default_factory=RoleConfig)
    judge: RoleConfig = Field(default_factory=RoleConfig)
    cache_path: str = str(DEFAULT_CACHE_DIR / "llm-cache.sqlite")  # "" disables the cache
    model_dir: str = str(DEFAULT_CACHE_DIR / "models")  # where the embedded GGUF is assembled
    replay_path: str | None = None  # recorded responses (JSONL) for the replay backend
    record_path: str | None = None  # append every response (any backend) to this JSONL, for later replay
    max_cost_usd: float | None = Field(None, gt=0)  # budget cap over all roles
    max_tokens: int | None = Field(None, gt=0)  # budget cap over all roles

    def role(self, name: str) -> RoleConfig:
        if name not in ("generator", "verifier", "judge"):
            raise UserError(f"unknown LLM role '{name}'", "use one of: generator, verifier, judge")
        return getattr(self, name)


class CorpusConfig(Section):
    source: Literal["default", "jsonl", "parquet", "hf", "wiki18", "openscholar"] = "default"
    path: str | None = None  # file, folder or glob; unused for the default corpus
    fields: dict[str, str] = Field(default_factory=dict)  # our field -> source field (id, title, text, ...)
    chunk_words: int = Field(200, ge=16)
    chunk_overlap: int = Field(40, ge=0)
    limit: int | None = Field(None, ge=1)  # read at most this many records
    split: str | None = None  # hf: which split of a saved DatasetDict (default: the only one, or "train")


class EmbeddingConfig(Section):
    model: str = "default"  # "default" = the packaged all-MiniLM-L6-v2; else a local path or model name
    query_prefix: str = ""  # e.g. "query: " for e5
    passage_prefix: str = ""  # e.g. "passage: " for e5
    batch_size: int = Field(64, ge=1)
    device: str = "auto"  # auto | cpu | cuda
    # CPU: openvino = OpenVINO at bf16 from a locally exported ONNX graph; auto = openvino where the CPU does bf16.
    # torch by default: benchmarks/retrieval.py --backends measured openvino at 1.6x, short of the 2x that would
    # justify a second runtime by default (issue 16)
    backend: Literal["auto", "torch", "openvino"] = "torch"
    fp16: bool = True  # on GPU only
    max_seq_length: int | None = None
    shard_size: int = Field(8192, ge=1)  # passages per embedding shard on disk (the unit of resume)


class IndexConfig(Section):
    kind: Literal["exact", "hnsw", "ivfpq"] = "exact"
    hnsw_m: int = Field(32, ge=4)
    hnsw_ef_construction: int = Field(200, ge=8)
    hnsw_ef_search: int = Field(128, ge=8)
    ivf_nlist: int | None = Field(None, ge=1)  # default: about 4*sqrt(n)
    ivf_nprobe: int = Field(16, ge=1)
    pq_m: int = Field(48, ge=1)  # sub-quantizers; must divide the embedding dimension
    pq_nbits: int = Field(8, ge=4, le=12)
    opq: bool = False
    ivf_train_size: int | None = Field(None, ge=1)  # training sample (default: min(n, max(50000, 64*nlist)))
    gpu: Literal["auto", "never", "always"] = "auto"


class ToolsConfig(Section):
    index_dir: str | None = None  # default: <cache>/index/<index_name, else the corpus name>
    index_name: str | None = Field(None, pattern=r"^[A-Za-z0-9][\w.-]*$")  # <cache>/index/<name> (`--name`, `--index`)
    scholar_index_dir: str | None = None  # second, scholarly index for the scholar tool
    server_url: str | None = None  # use a running `rubricforge corpus serve` instead of a local index
    scholar_url: str | None = None  # the scholar tool calls an OpenScholar server (http://host:8000/search)
    scholar_domains: str = "pes2o_v3"  # the `domains` field of OpenScholar requests
    top_k: int = Field(5, ge=1)
    snippet_chars: int = Field(600, ge=50)
    browse_chars: int = Field(8000, ge=100)
    max_queries: int = Field(10, ge=1)  # queries per search/scholar call
    leakage_ngram: int = Field(13, ge=1)  # leakage guard: shared normalised n-gram length
    server_timeout_s: float = Field(30.0, gt=0)  # requests to tools.server_url
    server_max_body_bytes: int = Field(1_000_000, ge=1024)  # `corpus serve`: larger request bodies get 413


class BuildConfig(Section):
    """The evidence-tree main job (DeepRubric §3.1–3.2)."""

    # Laptop defaults (the embedded 1.5B model on 2 cores: one small tree, a few minutes of LLM calls).
    # Paper scale (depth 3, branching 6/4/3, 60 nodes, 3 passages per node, 100 trees, a stronger model):
    # data/config.example.yaml.
    # Trees are built in seed order until at least n_trees were built and target_rows rows retained (0: no row
    # target), never more than max_trees (None: max(n_trees, 10 x target_rows)).
    n_trees: int = Field(1, ge=1)
    target_rows: int = Field(1, ge=0)
    max_trees: int | None = Field(None, ge=1)
    seed: int = 0
    max_depth: int = Field(2, ge=1)
    branching: list[int] = Field(default_factory=lambda: [3, 2])  # root, intermediate, deeper
    max_nodes: int = Field(4, ge=2)  # per tree, spent breadth-first
    passages_per_node: int = Field(1, ge=1)
    node_max_tokens: int | None = Field(256, ge=16)  # per stage-1 call (extract/decompose/ground); None: the role's
    # sentences: the extractor picks passage sentences by id (exact spans); free: it writes statements (Fig. 10)
    extract: Literal["sentences", "free"] = "sentences"
    # single: one Fig. 11 call; stepwise: select leaves, question, one criterion per leaf, logical criteria;
    # auto: stepwise for the embedded models, single for any other
    merge: Literal["auto", "single", "stepwise"] = "auto"
    # --source report --form long, the MaMs teacher: paper (C.4–C.9 verbatim); stepwise (one JSON-constrained
    # search query per turn, facts per chunk, one report call; agent/mams.py); auto: stepwise for the
    # embedded models, paper for any other
    teacher: Literal["auto", "paper", "stepwise"] = "auto"
    tree_concurrency: int = Field(2, ge=1)  # trees in flight at once
    redundancy_threshold: float = Field(0.9, gt=0, le=1)
    # passage gate (ours): a retrieved passage is read only when its cosine (the index's encoder) with the node's
    # sub-query and with the root query both reach this; -1 turns it off. Measured: docs/methods.md
    passage_gate: float = Field(0.25, ge=-1, le=1)
    max_leaves: int = Field(24, ge=1)  # tree serialization limits
    statements_per_leaf: int = Field(3, ge=1)
    max_chars: int = Field(6000, ge=500)
    min_rubrics: int = Field(5, ge=1)
    check_coverage: bool = True  # rule check (ours): every clause of the question is checked by a rubric
    keep_decisions: list[Literal["KEEP", "REVISE", "DROP"]] = ["KEEP", "REVISE"]  # pydantic copies it per instance
    rubric_source: Literal["tree", "closed-book", "search"] = "tree"
    # a tree cut by invalid model answers is built again by the next run (each time the calls the cache cannot
    # answer are sampled anew) until it is whole or this many rebuilds were made; a tree still cut then becomes
    # a row unless drop_incomplete_trees
    invalid_answer_retries: int = Field(2, ge=0)
    drop_incomplete_trees: bool = False

    @field_validator("branching")
    @classmethod
    def _positive(cls, v: list[int]) -> list[int]:
        if not v or any(b < 1 for b in v):
            raise ValueError("branching needs at least one value and every value must be >= 1")
        return v

    @model_validator(mode="after")
    def _cap(self) -> BuildConfig:
        if self.max_trees is not None and self.max_trees < self.n_trees:
            raise ValueError(f"max_trees ({self.max_trees}) is below n_trees ({self.n_trees})")
        return self

    def tree_cap(self) -> int:
        """The most trees a run builds (``max_trees`` resolved)."""
        return self.max_trees if self.max_trees is not None else max(self.n_trees, 10 * self.target_rows)


class KGConfig(Section):
    """The knowledge-graph multi-hop pipeline (MindDR §4.1, §4.5, §4.6); ``rubricforge build --source kg``.

    Laptop defaults (embedded model on 2 cores): the relations the corpus's sentences state between article
    titles (about 430 typed edges, no LLM) and its title links over every passage, no LLM relation
    extraction (the small models' triples are rarely stated by one sentence: docs/results.md), a few sampled
    subgraphs.
    """

    seed: int = 0
    extract_passages: int = Field(0, ge=0)  # passages read by the LLM relation extractor (one call each)
    link_passages: int | None = Field(None, ge=1)  # passages scanned for title mentions (None: all)
    min_title_chars: int = Field(4, ge=1)  # shorter titles are not matched as mentions
    n_paths: int = Field(6, ge=1)  # subgraphs to sample
    # chain lengths, cycled over the paths. No 1 by default: a one-hop question is its start entity's one fact, and
    # hiding that entity's name leaves none ("Which country has the largest city?" for Istanbul -> Turkey, seed 3)
    hops: list[int] = Field(default_factory=lambda: [2, 3])
    # every n-th subgraph has two branches (0: chains only). Off: with every hop determining the entity it leads
    # to (the determinacy check), each branch alone names the answer and a reader needs only one (docs/kg.md)
    branch_every: int = Field(0, ge=0)
    hub_exponent: float = Field(1.0, ge=0)  # sampling weight of a node: degree ** -hub_exponent
    reach_k: int = Field(5, ge=1)  # reachability: a hop's passage must be in the top-k of a search
    sample_attempts: int = Field(400, ge=1)  # candidate subgraphs tried per sampled one
    call_max_tokens: int = Field(160, ge=16)  # per short call (questions, filters, extraction)
    question_writer: Literal["template", "llm"] = "template"  # who writes the first question (questions.py)
    # the generator's rewrite into natural phrasing; off: of the 12 rewrites the 1.5B's rows kept on seeds 0-11,
    # 6 changed what the question asks or broke it, and the checks catch 2 (docs/results.md)
    question_rewrite: bool = False
    longform: bool = True  # research-style query + RACE rubrics for each retained example
    longform_max_tokens: int = Field(700, ge=64)
    filters: list[Literal["direct_answer", "single_retrieval", "plausibility"]] = [
        "direct_answer", "single_retrieval", "plausibility"]

    @field_validator("hops")
    @classmethod
    def _hop_range(cls, v: list[int]) -> list[int]:
        if not v or any(not 1 <= h <= 5 for h in v):
            raise ValueError("hops needs at least one value and every value must be between 1 and 5")
        return v


class RewardWeights(Section):
    """The composite reward's weights (DeepRubric Eq. 5). They are not renormalised: with components in
    [0, 1] the composite lies in [0, sum of weights] (the paper's sum to 1)."""

    rubric: float = Field(0.5, ge=0)
    format: float = Field(0.2, ge=0)
    citation: float = Field(0.2, ge=0)
    search: float = Field(0.1, ge=0)


class RewardConfig(Section):
    """Scoring agent rollouts (DeepRubric §3.3 / App. A; MindDR §5.2–5.3)."""

    judge_mode: Literal["per_criterion", "batched"] = "per_criterion"  # per_criterion = the paper
    weights: RewardWeights = Field(default_factory=RewardWeights)
    search_upper: int = Field(6, ge=1)  # U of Eq. 8
    distinct_queries: bool = False  # Eq. 8 counts valid calls; True counts distinct queries only
    orm_votes: int = Field(3, ge=1)  # ORM majority vote: samples of the judge
    orm_roles: list[str] = Field(default_factory=list, max_length=3)  # ORM by up to 3 judge models, one vote each (MindDR)
    answer_tag: str = "answer"  # Report-RL format check: DeepRubric's <answer>; MindDR writes <final_answer>
    report_lambda_cite: float = 0.1  # λc of MindDR Eq. 12 (tunable; the paper gives no value)
    report_lambda_format: float = 0.1  # λf of MindDR Eq. 12
    alignment_penalty: float = Field(1.0, ge=0)  # MindDR §5.4 pair score: subtracted per rule violation
    citation_relevance_threshold: float = Field(0.5, ge=0, le=1)  # τ of MindDR Eq. 10 (lexical relevance)
    tense_today: date | None = None  # the `tense` reward's "now" (MindDR App. 8.4); None: the day of scoring
    concurrency: int = Field(8, ge=1)  # rollouts scored at once by `rubricforge reward score` (reports by `rubrics eval`)
    lambda_pref: float = Field(1.0, ge=0)  # λ_pref of Prefs Eq. 1 (the rubric generator's hybrid reward)
    lambda_llm: float = Field(1.0, ge=0)  # λ_llm of Prefs Eq. 1


class RunnerConfig(Section):
    """Where the Prefect flows run their tasks (``rubricforge build`` and ``corpus build``)."""

    kind: Literal["threads", "processes", "dask", "ray"] = "threads"
    address: str | None = None  # dask: tcp://host:8786 (default: a local cluster); ray: ray://host:10001 (default: local)
    workers: int | None = Field(None, ge=1)  # threads / processes / local cluster workers (default: per kind)
    llm_limits: Literal["auto", "process", "prefect"] = "auto"  # auto: Prefect global limits unless kind=threads
    task_retries: int = Field(1, ge=0)  # a failed tree task is retried this many times
    retry_delay_s: float = Field(5.0, ge=0)


class TrainConfig(Section):
    """Training with TRL: ``rubricforge train grpo | sft | dpo-pairs`` and ``rollouts sample`` (DeepRubric §3.3,
    App. B, App. D; MindDR §5.4). Presets and loss types: :mod:`rubricforge.training.presets`."""

    preset: Literal["paper", "small-gpu", "cpu"] = "paper"  # GRPO hyperparameters (App. B Table 5 = paper)
    loss: Literal["grpo", "dapo", "gspo"] | None = None  # None: the preset's (grpo)
    max_tool_turns: int = Field(20, ge=0)  # tool-calling turns per rollout: 20 in training, 10 in evaluation (App. D)
    generation: Literal["auto", "transformers", "vllm-colocate", "vllm-server"] = "auto"  # auto: vLLM if installed + GPU
    vllm_server_url: str | None = None  # vllm-server: the `trl vllm-serve` address (default http://localhost:8000)
    reward: str = "composite"  # the GRPO reward: any name of rubricforge.rewards.scorer.ALL
    chat_template: str | None = None  # replace the model's chat template: qwen2.5 | qwen3 | a .jinja file
    output_dir: str | None = None  # default: <run_dir>/train/<stage>
    grpo_args: dict[str, Any] = Field(default_factory=dict)  # any TRL GRPOConfig field, over the preset
    sft_args: dict[str, Any] = Field(default_factory=dict)  # any TRL SFTConfig field, over App. B Table 4
    sft_curriculum: bool = False  # MindDR §5.1: short trajectories first, longer ones mixed in later (training.sft)
    # the curriculum's length bins in tokens: base up to the first, extension up to the second, extreme beyond
    sft_curriculum_bins: tuple[int, int] = (16384, 65536)
    # MindDR §5.1 early stop: a validation set, a dataset (questions: the policy's first step) or trajectories JSONL
    # (messages: the policy writes an assistant turn after the longest prefix that fits each context length)
    sft_stop_prompts: str | None = None
    sft_stop_contexts: list[int] = Field(default_factory=lambda: [65536, 131072])  # §5.1: 64K and 128K
    sft_stop_entropy: float = Field(0.9, ge=0)  # §5.1: entropy at least this share of its mid-training value
    sft_stop_mid_step: int | None = Field(None, ge=1)  # the mid-training step (paper: 60K); None: max_steps // 2
    sft_stop_every: int = Field(50, ge=1)  # optimiser steps between early-stop checks
    sft_stop_error: float = Field(0.0253, ge=0, le=1)  # stop at or below this format error rate (+ loss plateau)
    sft_stop_plateau: float = Field(0.01, ge=0)  # plateau: mean loss of the last window within this share of the one before
    sft_stop_tokens: int = Field(512, ge=1)  # tokens generated per check answer
    rollouts_per_prompt: int = Field(4, ge=1)  # `rollouts sample`: trajectories per question
    max_new_tokens: int = Field(2048, ge=1)  # `rollouts sample`: tokens per assistant turn
    pair_reward: str = "alignment"  # dpo-pairs: the quality score s(x, y) (MindDR §5.4; any reward name)
    dpo_high: float = 0.6  # dpo-pairs: a rollout scoring at least this is high quality (D+)
    dpo_low: float = 0.4  # dpo-pairs: at most this is low quality (D-)
    dpo_pairs_per_prompt: int = Field(1, ge=1)
    dpo_beta: float = Field(0.1, gt=0)  # β of MindDR Eq. 14 (`train dpo`; the paper gives none, TRL's default)
    dpo_args: dict[str, Any] = Field(default_factory=dict)  # any TRL DPOConfig field (`train dpo`)
    # gold judge (`train grpo | hote | score`, rubricforge.evaluation.gold): a judge that is not the training judge
    gold_judge: str | None = None  # a YAML config (its llm.judge) or a model name; None: off
    gold_every: int = Field(10, ge=1)  # optimiser steps between held-out evaluations
    gold_tasks: str | None = None  # held-out task set; None: the dataset's rows with split test / validation


class EvolveConfig(Section):
    """Training that adapts (``train grpo``): HOTE's evolving rubric bank (§2.2 Eq. 3) and hybrid tool / no-tool
    modes (§2.3); MindDR's Search-RL coefficient schedule and dynamic difficulty sampling (§5.2)."""

    rubrics: Literal["static", "evolving"] = "static"  # evolving: the judge updates each task's active rubrics per step
    role: str = "judge"  # the fixed model that updates the bank
    pos_weight: float = Field(1.0, gt=0)  # weight of a new positive rubric (DR Tulu)
    neg_weight: float = Field(1.0, gt=0)  # |weight| of a new negative rubric
    max_active: int = Field(5, ge=0)  # active rubrics kept per task after pruning
    max_new: int = Field(5, ge=0)  # new rubrics accepted per task and update
    answer_words: int = Field(450, ge=10)  # each response is cut to this many words for the update prompt
    dedup_cosine: float = Field(0.9, gt=0, le=1)  # a proposal this similar (MiniLM cosine) to a rubric is a duplicate
    modes: Literal["tool", "no_tool", "hybrid", "hote"] = "tool"  # hote: no_tool_steps no-tool, then hybrid
    no_tool_steps: int = Field(600, ge=0)  # HOTE: 600 no-tool steps, then hybrid (700 in the paper)
    tool_share: float = Field(0.5, ge=0, le=1)  # share of a hybrid step's prompts in tool mode (HOTE: half)
    seed: int = 0  # mode assignment
    # DAPO's dynamic sampling (MindDR §5.3): groups whose rewards are all equal are replaced by informative groups
    # of up to refill_rounds more generations, the rest masked out of the loss; None: on for Report-RL rewards
    dynamic_sampling: bool | None = None
    refill_rounds: int = Field(3, ge=0)
    difficulty_sampling: bool = False  # MindDR dynamic data: draw difficulty bins by weight (rows need `difficulty`)
    difficulty_band: tuple[float, float] = (0.1, 0.5)  # keep each bin's ORM accuracy in this band
    difficulty_every: int = Field(10, ge=1)  # steps between weight updates


class HoteConfig(Section):
    """HOTE self-play (``train hote``, §2.2–2.3, Algorithm 1): a proposer policy writes tasks from the solver's
    weaknesses, a solver policy answers, the fixed judge (``evolve.role``) keeps the rubric bank (``evolve.*``,
    which also sets the tool / no-tool modes) and writes the meta rubrics. Defaults are the paper's (§3.2)."""

    proposer_model: str | None = None  # the proposer's initial weights (None: the solver's; HOTE: Qwen3-8B)
    steps: int = Field(1300, ge=1)  # HOTE steps (600 no-tool + 700 hybrid in the paper)
    batch_size: int = Field(48, ge=2)  # B tasks per step: B/2 real + B/2 synthetic after step 1
    group: int = Field(8, ge=2)  # G solver rollouts per task
    proposer_group: int = Field(6, ge=2)  # G' proposals per combination (one GRPO group of the proposer)
    combo_size: int = Field(3, ge=1)  # k tasks of the step per combination (diverse proposing)
    max_task_words: int = Field(300, ge=1)  # a longer proposed task is invalid
    seed: int = 0  # real-task sampling and combinations
    # who retires an active rubric: judge = only the judge's delete_ids in its update (HOTE); spread = also DR Tulu's
    # pruning after scoring (zero spread over the group, then the evolve.max_active largest spreads), as `train grpo`
    retire: Literal["judge", "spread"] = "judge"
    modes: Literal["tool", "no_tool", "hybrid", "hote"] = "hote"  # §2.3: evolve.no_tool_steps no-tool steps, then
    # hybrid (evolve.tool_share of a step's real tasks with tools); tool is Fig. 4a's tool-only ablation
    # optimiser updates per HOTE step and policy (HOTE is silent): None = TRL's split of the B x G rollouts into
    # per_device_train_batch_size mini-batches (96 with --preset paper: 384 rollouts / 4); n = n updates, each
    # accumulating B x G / n rollouts (1: one update on the whole batch)
    updates_per_step: int | None = Field(None, ge=1)
    # the judge's sampling (App. E: "temperature=0, max_tokens=16384, top_p=1.0"), over the evolve.role role's own
    # for this run (None: the role's)
    judge_temperature: float | None = Field(0.0, ge=0)
    judge_top_p: float | None = Field(1.0, gt=0, le=1)
    judge_max_tokens: int | None = Field(16384, ge=1)
    proposer_grpo_args: dict[str, Any] = Field(default_factory=dict)  # GRPOConfig fields for the proposer only

    @model_validator(mode="after")
    def _proposer_groups(self) -> HoteConfig:
        if self.batch_size % (2 * self.proposer_group):
            raise ValueError(f"batch_size ({self.batch_size}) must be a multiple of 2 x proposer_group "
                             f"({self.proposer_group}): B/2 synthetic tasks come in groups of G'")
        return self

    @property
    def combinations(self) -> int:
        """N = B / (2 G') proposer groups per step (docs/methods.md H-5)."""
        return self.batch_size // (2 * self.proposer_group)
class ScoreConfig(Section):
    """SCORE self-play (``train score``, SCORE §3, Algs. 1–2; App. G Table 2 constants)."""

    evaluator_role: str = "judge"  # the model that assesses the reports (Listing 4 stages 2-4)
    assessor: Literal["role", "policy"] = "policy"  # the paper's shared actor assesses with its training weights
    # (§3.2, §3.6); role: the external score.evaluator_role model assesses instead (a stronger fixed judge)
    assess_tokens: int = Field(2048, ge=16)  # policy assessor: tokens per turn (Table 2's evaluator generation length)
    harness_role: str = "verifier"  # the fixed external meta-harness (Listing 3; GPT-5.2 in the paper)
    harness_every: int = Field(5, ge=1)  # M: the harness is regenerated when t mod M = 0
    ema_beta: float = Field(0.7, ge=0, lt=1)  # β of the evaluator's EMA baseline
    alpha: float = Field(1.0, ge=0)  # α: the evaluator update's scale against the writer's
    kl: float = Field(0.05, ge=0)  # λ: k3 KL to the reference policy in the actor loss (GRPOConfig beta)
    temperature: float = Field(0.8, gt=0)  # sampling temperature of both roles (the paper's evaluator's)
    verifier_mode: Literal["zero", "drop"] = "zero"  # depth < τ_s: reward 0 (paper) or unscored
    max_search_turns: int = Field(6, ge=1)  # evaluator turns per assessment (the last must score)
    report_words: int = Field(900, ge=50)  # each report is cut to this many words for the evaluator
    max_input_tokens: int | None = Field(8192, ge=16)  # Table 2's maximum input length: longer writer prompts are
    # left out of the training rows (None: no limit)
    warmup: int = Field(5, ge=0)  # Table 2's "warmup 5 steps", in SCORE steps (generation batches), --preset paper


class EvalConfig(Section):
    """`rubricforge eval` (docs/evaluation.md): a benchmark's preset and the scorer settings a preset sets."""

    # drb | drb2: the benchmark's official evaluator (rubricforge.evaluation.presets), under what is set explicitly
    preset: Literal["drb", "drb2"] | None = None
    race_prompt: Literal["minddr", "drb"] = "minddr"  # RACE's judge prompt: MindDR App. 8.3, or DRB's own (en / zh)
    fact_role: Literal["judge", "verifier"] = "judge"  # the LLM role that judges the citation scorer's pairs
    fact_prompt: Literal["rubricforge", "drb"] = "rubricforge"  # FACT's: DeepRubric Fig. 6 per pair, or DRB's own
    rubrics_per_call: int = Field(50, ge=1)  # drb2: rubric items per judge call (DeepResearch Bench II's CHUNK_SIZE)


class QualityConfig(Section):
    """Quality gates, the dataset jobs' stage before the export (:mod:`rubricforge.jobs.gates`): decontamination
    against benchmark prompts, semantic dedup of questions, learnability."""

    decontaminate: bool = True
    benchmarks: list[Literal["drb"]] = ["drb"]  # shipped prompt sets
    benchmark_files: list[str] = Field(default_factory=list)  # more prompt files (ResearchQA, DRACO, HealthBench, ...)
    ngram: int = Field(13, ge=1)  # a shared normalised n-gram with a benchmark prompt drops the question
    embedding_threshold: float | None = Field(0.9, gt=0, le=1)  # cosine to a benchmark prompt; None: n-grams only
    dedup_threshold: float | None = Field(0.95, gt=0, le=1)  # cosine between questions; None: no dedup
    previous_datasets: list[str] = Field(default_factory=list)  # datasets whose questions count as seen
    learnability: bool = False  # closed-book answer by the generator, scored with the example's own rubric
    too_easy_threshold: float = Field(0.8, ge=0, le=1)  # closed-book score at or above it: too easy
    drop_too_easy: bool = False  # drop too-easy examples (else only flag them on the card)


class Config(Section):
    run_dir: str = "runs/default"
    llm: LLMConfig = Field(default_factory=LLMConfig)
    corpus: CorpusConfig = Field(default_factory=CorpusConfig)
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    index: IndexConfig = Field(default_factory=IndexConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    build: BuildConfig = Field(default_factory=BuildConfig)
    runner: RunnerConfig = Field(default_factory=RunnerConfig)
    reward: RewardConfig = Field(default_factory=RewardConfig)
    kg: KGConfig = Field(default_factory=KGConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    evolve: EvolveConfig = Field(default_factory=EvolveConfig)
    hote: HoteConfig = Field(default_factory=HoteConfig)
    score: ScoreConfig = Field(default_factory=ScoreConfig)
    quality: QualityConfig = Field(default_factory=QualityConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)

    def index_dir(self) -> Path:
        """Where the corpus index lives unless ``tools.index_dir`` says otherwise."""
        if self.tools.index_dir:
            return Path(self.tools.index_dir)
        if self.tools.index_name:
            return INDEX_ROOT / self.tools.index_name
        name = self.corpus.source if self.corpus.source == "default" else Path(self.corpus.path or "corpus").stem
        return INDEX_ROOT / name

    def public_dict(self) -> dict[str, Any]:
        """The resolved config, safe to write to a run directory (no secret is ever a field)."""
        return self.model_dump(mode="json")


def _set_dotted(tree: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    for key in keys[:-1]:
        tree = tree.setdefault(key, {})
        if not isinstance(tree, dict):
            raise UserError(f"config key '{dotted}' goes below a value", "check the key against `rubricforge config`")
    tree[keys[-1]] = value


def _field_type(dotted: str) -> Any:
    """The annotation of config key ``dotted`` (for a key inside a mapping field such as
    ``corpus.fields``, the mapping's value type); None when no config field has that name."""
    model: Any = Config
    keys = dotted.split(".")
    for i, key in enumerate(keys):
        field = model.model_fields.get(key) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:  # a key inside a mapping field: the mapping's value type
            return (get_args(model) or (str, Any))[1] if model is dict or get_origin(model) is dict else None
        model = field.annotation
        if i == len(keys) - 1:
            return None if isinstance(model, type) and issubclass(model, Section) else model
    return None


def _leaf_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    out = []
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, Section):
            out += _leaf_keys(ann, f"{prefix}{name}.")
        else:
            out.append(prefix + name)
    return out


def _text_field(ann: Any) -> tuple[bool, bool]:
    """(is a text field, accepts None)."""
    args = get_args(ann) if get_origin(ann) in (Union, types.UnionType) else (ann,)
    kinds = [a for a in args if a is not type(None)]
    return len(kinds) == 1 and kinds[0] in (str, Path), len(kinds) < len(args)


def parse_value(dotted: str, raw: str) -> Any:
    """The value of an override or environment variable for key ``dotted``: YAML (``2`` -> 2, ``[1, 2]``
    -> a list), except for a text field, which keeps ``raw`` as written unless it is quoted or a null."""
    text, nullable = _text_field(_field_type(dotted))
    if not raw.strip():
        return ""
    if text and raw.strip()[0] not in "'\"" and not (nullable and raw.strip() in NULLS):
        return raw
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        raise UserError(f"config value '{dotted}={raw}' is not valid YAML", "quote it, e.g. key='some text'") from None


def parse_override(item: str) -> tuple[str, Any]:
    """``'build.max_depth=2'`` -> ``('build.max_depth', 2)``; see :func:`parse_value`."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise UserError(f"override '{item}' is not key=value", "write it like --set build.max_depth=2")
    return key.strip(), parse_value(key.strip(), raw)


def env_name(dotted: str) -> str:
    return ENV_PREFIX + dotted.upper().replace(".", "__")


def env_overrides(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """The ``RUBRICFORGE_*`` variables as a config tree; one that names no config key is logged (once) and skipped."""
    out: dict[str, Any] = {}
    for name, raw in (os.environ if environ is None else environ).items():
        if not name.startswith(ENV_PREFIX):
            continue
        dotted = name[len(ENV_PREFIX):].lower().replace("__", ".")
        if _field_type(dotted) is None:
            _warn_unknown(name)
            continue
        _set_dotted(out, dotted, parse_value(dotted, raw))
    return out


_warned: set[str] = set()


def _warn_unknown(name: str) -> None:
    if name in _warned:
        return
    _warned.add(name)
    close = difflib.get_close_matches(name, [env_name(k) for k in _leaf_keys(Config)], n=1, cutoff=0)
    log.warning("unknown environment variable %s is ignored (closest config key: %s)", name, close[0])


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value
    return base


def load_config(path: str | Path | None = None, overrides: list[str] | dict[str, Any] | None = None,
                environ: dict[str, str] | None = None, values: Mapping[str, Any] | None = None) -> Config:
    """Resolve the config; any mistake becomes a :class:`UserError` naming the key and the fix.

    ``overrides``: ``key=value`` texts (parsed as :func:`parse_override` says) or a config tree. ``values``: typed
    values by dotted key (the CLI's flags), applied last and as they are, never parsed."""
    data: dict[str, Any] = {}
    if path is not None:
        p = require_file(path, "config file", "pass an existing YAML file to --config")
        try:
            data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        except UnicodeDecodeError as exc:
            raise UserError(f"config file {p} is not UTF-8 text (byte {exc.start} cannot be decoded)",
                            "pass a YAML config file saved as UTF-8") from None
        except yaml.YAMLError as exc:
            raise UserError(f"config file {p} is not valid YAML ({exc.__class__.__name__})", "fix the YAML syntax") from None
        except OSError as exc:
            raise UserError(f"config file {p} cannot be read ({exc.strerror})", "check its permissions") from None
        if not isinstance(data, dict):
            raise UserError(f"config file {p} must hold a mapping at the top level", "see data/config.example.yaml")
    _merge(data, env_overrides(environ))
    if isinstance(overrides, dict):
        _merge(data, overrides)
    else:
        for item in overrides or []:
            _set_dotted(data, *parse_override(item))
    for dotted, value in (values or {}).items():
        _set_dotted(data, dotted, value)
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise UserError(f"config '{where}': {err['msg']}", "fix it in the config file, the environment or --set") from None
