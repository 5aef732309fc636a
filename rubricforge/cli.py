"""The command line. Thin: parse, load config, call a pipeline (or flow), print a summary.

Heavy modules (torch, faiss, llama_cpp, litellm, datasets) are imported inside the commands, so
``rubricforge --help`` answers at once.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from rubricforge.errors import RunFailed, UserError, require_file

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="Build evidence-grounded query–rubric datasets, rewards and RL runs for deep-research agents.")
corpus_app = typer.Typer(no_args_is_help=True, help="Load, index, search and serve a corpus.")
llm_app = typer.Typer(no_args_is_help=True, help="Check the configured models.")
reward_app = typer.Typer(no_args_is_help=True, help="Score agent responses with rubricforge's rewards; audit the judge.")
app.add_typer(corpus_app, name="corpus")
app.add_typer(llm_app, name="llm")
app.add_typer(reward_app, name="reward")
train_app = typer.Typer(no_args_is_help=True, help="Train agents with TRL: GRPO with the tools, cold-start SFT, DPO pairs.")
rollouts_app = typer.Typer(no_args_is_help=True, help="Run a model with the tools over dataset questions.")
app.add_typer(train_app, name="train")
app.add_typer(rollouts_app, name="rollouts")
prefs_app = typer.Typer(no_args_is_help=True, help="Preference pairs (query, chosen report, rejected report).")
rubrics_app = typer.Typer(no_args_is_help=True, help="Measure rubric sources against preference pairs; generate rubrics.")
app.add_typer(prefs_app, name="prefs")
app.add_typer(rubrics_app, name="rubrics")

ConfigOpt = Annotated[Optional[Path], typer.Option("--config", "-c", help="YAML config file.")]
SetOpt = Annotated[Optional[list[str]], typer.Option("--set", "-s", help="Override a config key: --set build.max_depth=2 (repeatable).")]
RunnerOpt = Annotated[Optional[str], typer.Option("--runner", help="Where tasks run: threads | processes | dask | ray "
                                                   "(runner.kind).")]
AddressOpt = Annotated[Optional[str], typer.Option("--address", help="Dask scheduler (tcp://host:8786) or Ray cluster "
                                                    "(ray://host:10001); default: a local one.")]
WorkersOpt = Annotated[Optional[int], typer.Option("--workers", help="Threads, processes or local workers.")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Show Prefect's logs too (always written to the "
                                          "run directory's logs/).")]


def _overrides(overrides: list[str] | None, **flags: object) -> list[str]:
    """``--set`` items plus the flags that were given, as ``key=value`` overrides (text single-quoted, so it
    stays text: ``--run-dir 2024``, ``--run-dir yes``)."""
    return [*(overrides or []), *(f"{key}={_quoted(value)}" for key, value in flags.items() if value is not None)]


def _quoted(value: object) -> str:
    return "'" + str(value).replace("'", "''") + "'" if isinstance(value, (str, Path)) else str(value)


def _config(config: Path | None, overrides: list[str] | None, **flags: object):
    from rubricforge.config import load_config

    return load_config(config, _overrides(overrides, **flags))


def _console():
    from rich.console import Console

    return Console(stderr=True)


# ---------------------------------------------------------------- main job


@app.command("build")
def build(
    config: ConfigOpt = None,
    set_: SetOpt = None,
    run_dir: Annotated[Optional[Path], typer.Option("--run-dir", help="Run directory (default: runs/default).")] = None,
    n_trees: Annotated[Optional[int], typer.Option("--n-trees", help="Evidence trees to build at least.")] = None,
    rows: Annotated[Optional[int], typer.Option("--rows", help="Keep building trees until this many rows are "
                                                "retained (build.target_rows; at most build.max_trees trees).")] = None,
    rubric_source: Annotated[Optional[str], typer.Option(
        "--rubric-source", help="tree (DeepRubric) | closed-book | search (the §4.4 ablation baselines).")] = None,
    push_to_hub: Annotated[Optional[str], typer.Option("--push-to-hub", help="Push the dataset to this Hub repo "
                                                        "(token from HF_TOKEN).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    runner: RunnerOpt = None,
    address: AddressOpt = None,
    workers: WorkersOpt = None,
    verbose: VerboseOpt = False,
    source: Annotated[str, typer.Option("--source", help="tree (evidence trees) | kg (knowledge-graph multi-hop "
                                                         "questions; default run dir runs/kg) | report (Report-RL "
                                                         "rows from --queries).")] = "tree",
    queries: Annotated[Optional[Path], typer.Option(help="--source report: JSONL of {id, query} (or DRB's "
                                                         "{id, prompt}).")] = None,
    race_rubrics: Annotated[Optional[Path], typer.Option(help="--source report: RACE rubrics per query (e.g. DRB's "
                                                              "criteria.jsonl); others are generated.")] = None,
    limit: Annotated[Optional[int], typer.Option(help="--source report: only the first N queries.")] = None,
    form: Annotated[str, typer.Option(help="--source report: short (App. 8.2 reference report) | long (a teacher "
                                           "trajectory with the tools: report, retrieval data, outline) | both.")] = "short",
    tool_budget: Annotated[int, typer.Option(help="--source report --form long: tool calls per teacher trajectory "
                                                  "(MaMs C.5, default 10).")] = 10,
) -> None:
    """Build the evidence-tree query–rubric dataset, with --source kg the knowledge-graph multi-hop one, or with
    --source report Report-RL rows (RACE rubrics + reference report) for --queries (resumable: run it again).

    Runs the ``build_dataset`` (``build_kg_dataset``) Prefect flow; Prefect's temporary server unless
    PREFECT_API_URL is set."""
    flags = {"run_dir": run_dir, "build.n_trees": n_trees, "build.target_rows": rows,
             "build.rubric_source": rubric_source,
             "runner.kind": runner, "runner.address": address, "runner.workers": workers}
    cfg = _config(config, set_, **flags)
    if source not in ("tree", "kg", "report"):
        raise UserError(f"unknown --source '{source}'", "use --source tree, kg or report")
    if source == "report":
        from rubricforge.jobs.report_data import build_report_data

        if queries is None:
            raise UserError("--source report needs --queries", "pass a JSONL of {id, query}")
        from rubricforge.training.mams import MamsConfig

        forms = ("short", "long") if form == "both" else (form,)
        r = build_report_data(cfg, queries, race_rubrics, limit, progress=not quiet, forms=forms,
                              mams=MamsConfig(tool_budget=tool_budget))
        failed = ", ".join(f"{k} {v}" for k, v in r.failed.items()) or "none"
        _console().print(f"{r.rows} {'/'.join(forms)}-form rows for {r.queries} queries (failed: {failed}) -> {r.out}")
        return
    from rubricforge.flows import local
    from rubricforge.jobs.kg import kg_config

    _preflight(cfg, ["generator", "verifier"], run_dir=(cfg if source == "tree" else kg_config(cfg)).run_dir)

    if source == "kg":
        kg = local.build_kg(cfg, push_to_hub, progress=not quiet, verbose=verbose)
        for line in kg.lines():
            _console().print(line, markup=False, highlight=False)
        return

    result = local.build(cfg, push_to_hub, progress=not quiet, verbose=verbose)
    _print_build_summary(result, cfg)


def _preflight(cfg, roles: list[str], run_dir: str) -> None:
    """Configuration mistakes end here, before any work: the run directory, a mistyped index folder, the
    LLM roles (cache path, keys, models, api_base; :func:`rubricforge.llm.check.preflight`)."""
    from rubricforge.llm.check import preflight
    from rubricforge.rundir import check_writable_dir

    check_writable_dir(run_dir, "run directory", "--run-dir (or --set run_dir=...)")
    index_dir = cfg.tools.index_dir
    if index_dir and cfg.corpus.source == "default" and not Path(index_dir).exists():
        raise UserError(f"tools.index_dir {index_dir} does not exist (and corpus.source is the default corpus)",
                        "fix the path, or build an index there first: rubricforge corpus build --out "
                        f"{index_dir} [--source ... --path ...]")
    preflight(cfg.llm, roles)


def _print_build_summary(result, cfg) -> None:
    s, console = result.summary, _console()
    head, call, dataset, viewer = result.lines()
    colour = "green" if s.status == "complete" else "yellow"
    console.print(f"[{colour}]{s.status}[/{colour}]{head.removeprefix(s.status)}")
    console.print(call)
    for warning in s.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}")
    console.print(dataset)
    console.print(f"{viewer}   (open it in a browser; rebuild with `rubricforge view {s.run_dir}`)")
    if cfg.llm.generator.backend == "local":
        console.print("stronger model: --set llm.generator.backend=litellm --set llm.generator.model=openai/gpt-4o-mini "
                      "(likewise llm.verifier), or a vLLM server: --set llm.generator.model=hosted_vllm/<model> "
                      "--set llm.generator.api_base=http://host:8000/v1")


@app.command("view")
def view(run_dir: Annotated[Path, typer.Argument(help="A run directory written by `rubricforge build`.")]) -> None:
    """Write the run's static HTML viewer (trees, questions, rubrics, verdicts) and print its path."""
    from rubricforge.export import write_viewer

    if not run_dir.is_dir():
        raise UserError(f"run directory {run_dir} not found", "pass the folder `rubricforge build` wrote (runs/<name>)")
    typer.echo(write_viewer(run_dir))


# ---------------------------------------------------------------- corpus


@corpus_app.command("build")
def corpus_build(
    config: ConfigOpt = None,
    set_: SetOpt = None,
    source: Annotated[Optional[str], typer.Option(help="default | jsonl | parquet | hf | wiki18 | openscholar")] = None,
    path: Annotated[Optional[str], typer.Option(help="Corpus file, folder or glob.")] = None,
    index_kind: Annotated[Optional[str], typer.Option("--index", help="exact | hnsw | ivfpq")] = None,
    out: Annotated[Optional[Path], typer.Option(help="Index folder (default: the cache).")] = None,
    name: Annotated[Optional[str], typer.Option("--name", help="Name the index (<cache>/index/NAME): search it "
                                                               "later with --index NAME.")] = None,
    verbose: VerboseOpt = False,
) -> None:
    """Load, chunk, embed and index a corpus (resumable): the ``index_corpus`` Prefect flow."""
    from rubricforge.flows import local

    flags = {"corpus.source": source, "corpus.path": path, "index.kind": index_kind, "tools.index_dir": out,
             "tools.index_name": name}
    cfg = _config(config, set_, **flags)
    info = local.index(cfg, verbose=verbose)
    _console().print(f"[green]index ready[/green] {info.path}  passages={info.n_passages}  "
                     f"kind={info.kind}  snapshot={info.corpus_hash[:12]}")
    from rubricforge.config import INDEX_ROOT

    if Path(info.path).parent == INDEX_ROOT:
        _console().print(f"search it with: rubricforge corpus search --index {Path(info.path).name} \"<query>\"",
                         markup=False, highlight=False)


IndexOpt = Annotated[Optional[str], typer.Option("--index", help="A named index (see `rubricforge corpus list`).")]


@corpus_app.command("list")
def corpus_list() -> None:
    """List the named indexes in the cache: passages, source, kind, embedding model, snapshot."""
    from rubricforge.config import INDEX_ROOT
    from rubricforge.corpora.catalog import list_indexes

    entries = list_indexes()
    if not entries:
        _console().print(f"no indexes in {INDEX_ROOT} (build one with `rubricforge corpus build --name NAME`)")
        return
    table = _table("name", "passages", "source", "kind", "model", "snapshot", "built")
    for e in entries:
        table.add_row(e["name"], str(e.get("passages", "?")), str(e.get("source") or e.get("error", "?")),
                      str(e.get("kind", "")), str(e.get("model", "")), str(e.get("corpus_hash", ""))[:12],
                      str(e.get("built_at", "")))
    _console().print(table)


@corpus_app.command("info")
def corpus_info(config: ConfigOpt = None, set_: SetOpt = None,
                index_dir: Annotated[Optional[Path], typer.Option("--index-dir")] = None,
                index: IndexOpt = None) -> None:
    """Describe a built index: passages, embedding model, index kind, snapshot hash."""
    import json

    from rubricforge.corpora.index_store import CorpusIndex

    cfg = _config(config, set_, **{"tools.index_dir": index_dir, "tools.index_name": index})
    typer.echo(json.dumps(CorpusIndex.open(cfg.index_dir()).info(), indent=2))


@corpus_app.command("search")
def corpus_search(
    queries: Annotated[list[str], typer.Argument(help="One or more queries.")],
    config: ConfigOpt = None,
    set_: SetOpt = None,
    k: Annotated[Optional[int], typer.Option("-k", help="Results per query.")] = None,
    scholar: Annotated[bool, typer.Option(help="Use the scholar index.")] = False,
    index: IndexOpt = None,
) -> None:
    """Search the index and print the tool output the agent would see (App. D format)."""
    from rubricforge.corpora.tools import ERROR_PREFIX, ToolBox

    blank = next((n for n, q in enumerate(queries, 1) if not q.strip()), None)
    if blank is not None:
        raise UserError(f"query {blank} is empty", "pass non-empty queries: rubricforge corpus search \"<query>\"")
    cfg = _config(config, set_, **{"tools.top_k": k, "tools.index_name": index})
    with ToolBox.from_config(cfg, require_scholar=scholar) as tools:
        output = tools.scholar(queries) if scholar else tools.search(queries)
    if output.startswith(ERROR_PREFIX):  # e.g. -k 0, too many queries, a retrieval server that stopped answering
        raise UserError(output.removeprefix(ERROR_PREFIX).strip())
    typer.echo(output)


@corpus_app.command("serve")
def corpus_serve(
    config: ConfigOpt = None,
    set_: SetOpt = None,
    host: str = "127.0.0.1",
    port: int = 8765,
    index: IndexOpt = None,
    save_address_to: Annotated[Optional[Path], typer.Option(
        "--save-address-to", help="Write ip:port here for ASearcher/AReaL clients: a .txt file, or a folder "
                                  "(Host<ip>_IP<port>.txt, ASearcher's layout).")] = None,
) -> None:
    """Serve /retrieve, /access, /scholar (ASearcher-compatible) and /search (OpenScholar's API) over HTTP."""
    from rubricforge.corpora.server import serve

    serve(_config(config, set_, **{"tools.index_name": index}), host=host, port=port, save_address_to=save_address_to)


# ---------------------------------------------------------------- llm


@llm_app.command("check")
def llm_check(
    config: ConfigOpt = None,
    set_: SetOpt = None,
    role: Annotated[Optional[list[str]], typer.Option("--role", "-r", help="generator | verifier | judge (default: all)")] = None,
) -> None:
    """Print each role's backend and model and one structured test completion; exit 1 if a role failed."""
    import asyncio

    from rubricforge.llm.check import check_roles

    cfg = _config(config, set_)
    roles = role or ["generator", "verifier", "judge"]
    lines, failed = asyncio.run(check_roles(cfg, roles))
    for line in lines:
        typer.echo(line)
    if failed:
        raise RunFailed(f"{len(failed)} of {len(roles)} roles gave no valid answer ({', '.join(failed)}); see above")


# ---------------------------------------------------------------- config


# ---------------------------------------------------------------- rewards

DatasetOpt = Annotated[Path, typer.Option("--dataset", "-d", help="Dataset folder, run directory, .jsonl or .parquet.")]
ResponsesOpt = Annotated[Path, typer.Option("--responses", "-r", help='JSONL of {"id", "response", "snippets"?}.')]


@reward_app.command("score")
def reward_score(
    dataset: DatasetOpt,
    responses: ResponsesOpt,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    rewards: Annotated[str, typer.Option(help="Comma-separated rewards, or a group: deeprubric | report | search_rl "
                                              "| all.")] = "deeprubric",
    out: Annotated[Optional[Path], typer.Option(help="Output JSONL (default: <responses>.scores.jsonl).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Score each response against its example: a per-component JSONL and a summary table (resumable)."""
    from rubricforge.jobs.score import score_responses
    from rubricforge.rewards.scorer import GROUPS

    names = GROUPS.get(rewards) or tuple(n.strip() for n in rewards.split(",") if n.strip())
    summary = score_responses(_config(config, set_), dataset, responses, names, out, progress=not quiet)
    console = _console()
    table = _table("reward", "mean", "min", "max", "scored", "unscored")
    for name, s in summary.rewards.items():
        table.add_row(name, *(_fmt(s[k]) for k in ("mean", "min", "max")),
                      str(s["scored"]), str(s["unscored"]))
    console.print(table)
    console.print(f"{summary.responses} responses ({summary.scored_now} scored now) -> {summary.out}")
    if summary.rejects.get("total"):
        console.print(f"[yellow]skipped {summary.rejects['total']} bad lines[/yellow]: {summary.rejects['file']}")
    if summary.no_known_tags:
        console.print(f"[yellow]{summary.no_known_tags} responses hold no known tags[/yellow] (<think>, <answer>, "
                      "<tool_call>/<tool_response> or DR Tulu's <call_tool>/<tool_output>): no answer was found, so "
                      "their answer-based rewards are 0")


@reward_app.command("audit")
def reward_audit(
    dataset: DatasetOpt,
    responses: ResponsesOpt,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    repeats: Annotated[int, typer.Option(min=2, help="Independent samples of the judge per criterion.")] = 3,
    second_judge: Annotated[str, typer.Option(help="The LLM role compared with the judge.")] = "verifier",
    out: Annotated[Optional[Path], typer.Option(help="Write the full report (JSON) here.")] = None,
) -> None:
    """Score the same responses several times and with two judges; print variance and agreement."""
    import json

    from rubricforge.rewards.audit import run_audit

    report = run_audit(_config(config, set_), dataset, responses, repeats, second_judge)
    console = _console()
    v = report.variance
    console.print(f"judge {report.judge} vs {report.second_judge}: {report.responses} responses "
                  f"({report.skipped_no_answer} without an answer), {report.criteria} criteria, {report.repeats} repeats")
    console.print(f"repeat variance (0–4 scale): mean {_fmt(v['mean'])}, max {_fmt(v['max'])}, "
                  f"criteria with disagreeing repeats {_fmt(v['disagreeing_share'])}")
    table = _table("comparison", "pairs", "exact", "kappa (quadratic)", "spearman")
    for name, a in report.agreement.items():
        table.add_row(name, str(a["pairs"]), _fmt(a["exact"]), _fmt(a["kappa_quadratic"]), _fmt(a["spearman"]))
    console.print(table)
    console.print(f"rubric reward spearman (judge vs second judge): "
                  f"{_fmt(report.agreement['judge_vs_second_judge']['reward_spearman'])}; unscored calls {report.unscored}")
    if out is not None:
        from dataclasses import asdict

        from rubricforge.rundir import atomic_write_text

        atomic_write_text(out, json.dumps(asdict(report), indent=2) + "\n")
        console.print(f"report: {out}")


# ---------------------------------------------------------------- training

ModelOpt = Annotated[str, typer.Option("--model", "-m", help="Policy model: a local folder or a cached Hub name.")]
OutputOpt = Annotated[Optional[Path], typer.Option("--output-dir", help="Where the model goes (train.output_dir; "
                                                    "default <run_dir>/train/<stage>).")]


@train_app.command("grpo")
def train_grpo(
    dataset: DatasetOpt,
    model: ModelOpt,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    preset: Annotated[Optional[str], typer.Option(help="paper (App. B Table 5) | small-gpu | cpu (train.preset).")] = None,
    loss: Annotated[Optional[str], typer.Option(help="grpo | dapo | gspo (train.loss).")] = None,
    max_tool_turns: Annotated[Optional[int], typer.Option(help="Tool turns per rollout (train.max_tool_turns, "
                                                               "default 20).")] = None,
    output_dir: OutputOpt = None,
    rubrics: Annotated[Optional[str], typer.Option(help="static | evolving: the judge adds and prunes each task's "
                                                        "active rubrics every step (evolve.rubrics).")] = None,
    modes: Annotated[Optional[str], typer.Option(help="tool | no_tool | hybrid | hote: HOTE's tool / no-tool "
                                                      "modes and schedule (evolve.modes).")] = None,
    resume_from: Annotated[Optional[Path], typer.Option(help="A checkpoint-N folder to resume from (policy, "
                                                              "rubric bank, reward weights).")] = None,
) -> None:
    """GRPO on a rubricforge dataset with the search / browse / scholar tools and the composite reward."""
    from rubricforge.training.grpo import build_grpo

    cfg = _config(config, set_, **{"train.preset": preset, "train.loss": loss, "train.max_tool_turns": max_tool_turns,
                                   "train.output_dir": output_dir, "evolve.rubrics": rubrics, "evolve.modes": modes})
    run = build_grpo(cfg, dataset, model)
    if run.note:
        _console().print(run.note)
    metrics = run.train(resume_from)
    _console().print(f"trained {run.trainer.state.global_step} steps; last reward {_fmt(metrics.get('reward'))} "
                     f"-> {run.output_dir}")


@train_app.command("hote")
def train_hote(
    dataset: DatasetOpt,
    model: ModelOpt,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    proposer_model: Annotated[Optional[str], typer.Option(help="The proposer's initial weights (hote.proposer_model; "
                                                               "default: the solver's).")] = None,
    steps: Annotated[Optional[int], typer.Option(help="HOTE steps (hote.steps).")] = None,
    preset: Annotated[Optional[str], typer.Option(help="paper | small-gpu | cpu (train.preset), for both policies.")] = None,
    modes: Annotated[Optional[str], typer.Option(help="tool | no_tool | hybrid | hote (evolve.modes).")] = None,
) -> None:
    """HOTE self-play (Algorithm 1): a proposer writes tasks from the solver's weaknesses, the solver answers,
    the fixed judge keeps the rubric bank; both policies train with GRPO. Resumes from <run_dir>/hote."""
    from rubricforge.training.hote import HoteRun, step_summary

    cfg = _config(config, set_, **{"hote.proposer_model": proposer_model, "hote.steps": steps,
                                   "train.preset": preset, "evolve.modes": modes})
    run = HoteRun(cfg, dataset, model)
    h = cfg.hote
    _console().print(f"HOTE: B={h.batch_size} tasks x G={h.group} rollouts, {h.combinations} proposer groups x "
                     f"G'={h.proposer_group} per step; judge calls per step: {h.batch_size} rubric updates + "
                     f"{h.batch_size * h.group} responses x |R| rubrics + {h.combinations} meta-rubric calls")
    _console().print(run.cost.line())
    records = run.train(on_step=lambda r: _console().print(step_summary(r)))
    _console().print(f"trained {len(records)} HOTE steps (now at step {run.step}) -> {run.dir}")


@train_app.command("score")
def train_score(
    dataset: DatasetOpt,
    model: ModelOpt,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    preset: Annotated[Optional[str], typer.Option(help="paper (App. B Table 5) | small-gpu | cpu (train.preset).")] = None,
    output_dir: OutputOpt = None,
    resume_from: Annotated[Optional[Path], typer.Option(help="A checkpoint-N folder to resume from (policy, "
                                                              "dimension scheduler, harness, EMA baseline).")] = None,
) -> None:
    """SCORE self-play: one policy writes reports and selects the rubric they are judged by (KL 0.05)."""
    from rubricforge.training.score import build_score

    cfg = _config(config, set_, **{"train.preset": preset, "train.output_dir": output_dir})
    run = build_score(cfg, dataset, model)
    _console().print(run.note)
    metrics = run.train(resume_from)
    _console().print(f"trained {run.trainer.state.global_step} steps; last reward {_fmt(metrics.get('reward'))}, "
                     f"R_eval {_fmt(metrics.get('score/r_eval'))} -> {run.output_dir}")


@train_app.command("from-gguf")
def train_from_gguf(
    out: Annotated[Path, typer.Option("--out", help="Folder for the transformers model (written once).")],
    gguf: Annotated[Optional[Path], typer.Option("--gguf", help="A .gguf file (default: the embedded "
                                                                 "Qwen2.5-Coder-0.5B, checked by sha256).")] = None,
    config: ConfigOpt = None,
    set_: SetOpt = None,
) -> None:
    """Turn a GGUF model into a trainable transformers folder (a policy for `train grpo` on CPU)."""
    from rubricforge.training.model import EMBEDDED_POLICY, gguf_to_transformers

    if gguf is None:
        from rubricforge.llm.local_model import ensure_model

        gguf = ensure_model(_config(config, set_).llm.model_dir, EMBEDDED_POLICY)
    else:
        require_file(gguf, "GGUF file", "pass --gguf PATH to a .gguf file, or leave it out for the embedded model")
    _console().print(f"policy model: {gguf_to_transformers(gguf, out)}")


@train_app.command("rubric-generator")
def train_rubric_generator(
    pairs: Annotated[Path, typer.Option("--pairs", "-p", help="Pairs JSONL (prefs import / prefs degrade); "
                                                              "trains on its train split.")],
    model: ModelOpt,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    preset: Annotated[Optional[str], typer.Option(help="paper (seed 004 Table 3) | small-gpu | cpu (train.preset).")] = None,
    loss: Annotated[Optional[str], typer.Option(help="grpo | dapo | gspo (train.loss).")] = None,
    output_dir: OutputOpt = None,
) -> None:
    """GRPO of a rubric generator with the hybrid reward R_pref + R_llm + R_fmt (seed 004 Eq. 1) by the judge role."""
    from rubricforge.training.rubric_generator import build_rubric_generator

    cfg = _config(config, set_, **{"train.preset": preset, "train.loss": loss, "train.output_dir": output_dir})
    run = build_rubric_generator(cfg, pairs, model)
    metrics = run.train()
    _console().print(f"trained {run.trainer.state.global_step} steps; last reward {_fmt(metrics.get('reward'))} "
                     f"-> {run.output_dir}")


@train_app.command("sft")
def train_sft(
    data: Annotated[Path, typer.Option("--data", help='JSONL of {"messages": [...], "tools"?} trajectories '
                                                      "(rollouts sample writes them).")],
    model: ModelOpt,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    output_dir: OutputOpt = None,
) -> None:
    """The cold-start SFT stage on trajectories (App. B Table 4 defaults; train.sft_args overrides)."""
    from rubricforge.training.sft import run_sft

    out, metrics = run_sft(_config(config, set_, **{"train.output_dir": output_dir}), data, model)
    _console().print(f"SFT done; last loss {_fmt(metrics.get('loss'))} -> {out}")


PairsOpt = Annotated[Path, typer.Option("--pairs", help="The --out folder (or pairs.jsonl) of `train dpo-pairs`.")]


@train_app.command("dpo")
def train_dpo(pairs: PairsOpt, model: ModelOpt, config: ConfigOpt = None, set_: SetOpt = None,
              output_dir: OutputOpt = None) -> None:
    """DPO on chosen / rejected pairs (MindDR Eq. 14; train.dpo_beta, train.dpo_args)."""
    from rubricforge.training.preference import run_preference

    out, metrics = run_preference(_config(config, set_, **{"train.output_dir": output_dir}), pairs, model, "dpo")
    _console().print(f"DPO done; last loss {_fmt(metrics.get('loss'))} -> {out}")


@train_app.command("self-sft")
def train_self_sft(pairs: PairsOpt, model: ModelOpt, config: ConfigOpt = None, set_: SetOpt = None,
                   output_dir: OutputOpt = None) -> None:
    """Self-SFT on the chosen side of the pairs (MindDR Eq. 15; train.sft_args)."""
    from rubricforge.training.preference import run_preference

    out, metrics = run_preference(_config(config, set_, **{"train.output_dir": output_dir}), pairs, model, "self-sft")
    _console().print(f"Self-SFT done; last loss {_fmt(metrics.get('loss'))} -> {out}")


@train_app.command("dpo-pairs")
def train_dpo_pairs(
    dataset: DatasetOpt,
    rollouts: Annotated[Path, typer.Option("--rollouts", help="JSONL written by `rubricforge rollouts sample`.")],
    out: Annotated[Path, typer.Option("--out", help="Folder for the pairs (save_to_disk + pairs.jsonl).")],
    config: ConfigOpt = None,
    set_: SetOpt = None,
    scores: Annotated[Optional[Path], typer.Option(help="Scores from `reward score` (default: score the rollouts "
                                                        "now, resumably).")] = None,
) -> None:
    """Chosen / rejected pairs per question from scored rollouts (MindDR §5.4), for TRL's DPOTrainer."""
    from rubricforge.jobs.dpo_pairs import build_pairs

    s = build_pairs(_config(config, set_), dataset, rollouts, out, scores, progress=True)
    _console().print(f"{s.pairs} pairs from {s.prompts} questions ({s.scored} scored rollouts, {s.unscored} "
                     f"unscored, {s.without_pair} questions without a pair) -> {s.out}")


@rollouts_app.command("sample")
def rollouts_sample(
    dataset: DatasetOpt,
    model: ModelOpt,
    out: Annotated[Path, typer.Option("--out", help="Trajectories JSONL (appended; a re-run resumes).")],
    config: ConfigOpt = None,
    set_: SetOpt = None,
    n: Annotated[Optional[int], typer.Option("--n", help="Trajectories per question (train.rollouts_per_prompt).")] = None,
    limit: Annotated[Optional[int], typer.Option(help="Only the first N questions.")] = None,
    workflow: Annotated[str, typer.Option(help="react (the App. D agent) | mams (seed 004's search / state / "
                                               "report agents).")] = "react",
) -> None:
    """Answer dataset questions with a model and the tools; write trajectories for SFT, DPO or reward audits."""
    from rubricforge.training.rollouts import sample_rollouts

    s = sample_rollouts(_config(config, set_, **{"train.rollouts_per_prompt": n}), dataset, model, out, limit,
                        progress=True, workflow=workflow)
    _console().print(f"{s.trajectories} trajectories ({s.sampled_now} sampled now, {s.tool_calls} tool calls) -> {s.out}")

# ---------------------------------------------------------------- preference pairs and rubric sources (seed 004)

PairsOut = Annotated[Path, typer.Option("--out", help="Pairs JSONL to write.")]


@prefs_app.command("import")
def prefs_import(
    path: Annotated[Path, typer.Argument(help="JSONL or parquet rows: id, query, report_chosen, report_rejected, "
                                              "topic, language, split (optional), sources, annotator.")],
    out: PairsOut,
    seed: Annotated[int, typer.Option(help="Seed of the topic-balanced 8:1:1 split of rows without a split.")] = 0,
) -> None:
    """Check and import preference pairs; bad rows go to <out>.rejects.jsonl with their reason."""
    from rubricforge.corpora.rejects import Rejects
    from rubricforge.pipelines.preferences import read_pairs, split_counts, write_pairs

    rejects = Rejects(out.with_name(f"{out.stem}.rejects.jsonl"))
    try:
        pairs = read_pairs(path, rejects, seed)
    except BaseException:
        rejects.discard()
        raise
    rejects.commit()
    if not pairs:
        raise UserError(f"no valid pair in {path}", f"see {rejects.path} for why each row was rejected")
    write_pairs(pairs, out)
    splits = ", ".join(f"{k} {v}" for k, v in split_counts(pairs).items())
    _console().print(f"{len(pairs)} pairs ({splits}) -> {out}")
    if rejects.total:
        _console().print(f"[yellow]skipped {rejects.total} bad rows[/yellow]: {rejects.path}")


@prefs_app.command("degrade")
def prefs_degrade(
    reports: Annotated[Path, typer.Argument(help="JSONL of good reports: id, query (or prompt), report (or article); "
                                                 "e.g. DeepResearch Bench's test_data/raw_data/<system>.jsonl.")],
    out: PairsOut,
    kinds: Annotated[str, typer.Option(help="Comma-separated degradations: facts, sections, citations_removed, "
                                            "citations_fabricated, padding.")] =
    "facts,sections,citations_removed,citations_fabricated,padding",
    queries: Annotated[Optional[Path], typer.Option(help="JSONL with id, topic, language per report id "
                                                         "(e.g. DRB's prompt_data/query.jsonl).")] = None,
    ids: Annotated[Optional[str], typer.Option(help="Only these report ids (comma-separated).")] = None,
    max_chars: Annotated[Optional[int], typer.Option(help="Cut each good report to whole sections within this "
                                                          "many characters before degrading it.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the degradations and the split.")] = 0,
) -> None:
    """Build labelled pairs from good reports: chosen = the report, rejected = it after one controlled degradation."""
    from rubricforge.corpora.rejects import Rejects
    from rubricforge.pipelines.preferences import degrade_reports

    rejects = Rejects(out.with_name(f"{out.stem}.rejects.jsonl"))
    try:
        s = degrade_reports(reports, out, [k.strip() for k in kinds.split(",") if k.strip()], rejects, queries,
                            {i.strip() for i in ids.split(",")} if ids else None, max_chars, seed)
    except BaseException:
        rejects.discard()
        raise
    rejects.commit()
    splits = ", ".join(f"{k} {v}" for k, v in s.splits.items())
    na = ", ".join(f"{k} {v}" for k, v in s.not_applicable.items()) or "none"
    _console().print(f"{s.pairs} pairs from {s.reports} reports ({splits}; not applicable: {na}) -> {out}")
    if rejects.total:
        _console().print(f"[yellow]skipped {rejects.total} bad rows[/yellow]: {rejects.path}")


@rubrics_app.command("eval")
def rubrics_eval(
    pairs: Annotated[Path, typer.Option("--pairs", "-p", help="Pairs JSONL (prefs import / prefs degrade).")],
    source: Annotated[str, typer.Option("--source", help="Comma-separated rubric sources: general, generated, "
                                                         "closed-book, search, race, tree; and the judge baselines "
                                                         "pointwise, pairwise (seed 004 Table 1).")],
    config: ConfigOpt = None,
    set_: SetOpt = None,
    run_dir: Annotated[Optional[Path], typer.Option("--run-dir", help="Results go to <run-dir>/rubric-eval/.")] = None,
    split: Annotated[Optional[str], typer.Option(help="Only this split (train | validation | test).")] = None,
    race_rubrics: Annotated[Optional[Path], typer.Option(help="RACE rubrics per query for --source race "
                                                              "(e.g. DRB's criteria.jsonl).")] = None,
    dataset: Annotated[Optional[Path], typer.Option(help="For --source tree: the rubricforge dataset the queries "
                                                         "came from.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Preference accuracy and paired Cohen's d of each rubric source (seed 004 Table 1), resumable."""
    from rubricforge.jobs.rubric_eval import TABLE_HEADER, evaluate, table_rows

    cfg = _config(config, set_, run_dir=run_dir)
    result = evaluate(cfg, pairs, [s.strip() for s in source.split(",") if s.strip()], split, race_rubrics, dataset,
                      progress=not quiet)
    table = _table(*TABLE_HEADER)
    for row in table_rows(result):
        table.add_row(*row)
    console = _console()
    console.print(table)
    for s in result.sources:
        if s.rubrics_missing:
            console.print(f"[yellow]{s.source}: no rubric for {s.rubrics_missing} queries[/yellow] (their pairs are "
                          "unscored; see rubrics.jsonl)")
    console.print(f"judge {result.judge_model} · results: {result.out_dir}/table.md, summary.json")


@rubrics_app.command("generate")
def rubrics_generate(
    dataset: DatasetOpt,
    out: Annotated[Path, typer.Option("--out", help="Dataset JSONL with the generated 'rubrics' column.")],
    config: ConfigOpt = None,
    set_: SetOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Rubrics for every question by the generator role (prompt C.1), for `train grpo --set train.reward=pref_rubric`."""
    from rubricforge.jobs.rubric_generate import generate_dataset_rubrics

    s = generate_dataset_rubrics(_config(config, set_), dataset, out, progress=not quiet)
    _console().print(f"{s.written} of {s.rows} rows with rubrics from {s.model} ({s.generated_now} generated now, "
                     f"{s.failed} unreadable and left out) -> {s.out}")


def _table(*columns: str):
    from rich.table import Table

    table = Table()
    for c in columns:
        table.add_column(c)
    return table


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


@app.command("convert")
def convert(
    src: Annotated[Path, typer.Argument(help="Input: .jsonl, .json, .parquet, or a dataset folder / run directory.")],
    dst: Annotated[Path, typer.Argument(help="Output file (.jsonl, .json or .parquet).")],
    to: Annotated[str, typer.Option("--to", help="Output format (see below).")] = "rubricforge",
    from_: Annotated[Optional[str], typer.Option("--from", help="Input format (default: detected).")] = None,
    rejects: Annotated[Optional[Path], typer.Option(help="Rejected records (default: <dst>.rejects.jsonl).")] = None,
    source: Annotated[str, typer.Option(help="The dataset name written where a format has one (DR Tulu source, "
                                             "verl data_source).")] = "rubricforge",
) -> None:
    """Convert between rubricforge's rows and DR Tulu, open-instruct, DeepRubric, RaR, DRB criteria, ResearchQA,
    HealthBench, RubricHub, ResearchRubrics, verl, verl-rubric and TRL rows; records that cannot convert are
    skipped, counted and written to a rejects file.

    Formats: rubricforge, drtulu, openinstruct, deeprubric, rar, drb, researchqa, healthbench, rubrichub,
    researchrubrics, verl, verlrubric, trl."""
    from rubricforge.export.convert import convert_file

    got, rej = convert_file(src, dst, to, from_, rejects, source)
    console = _console()
    console.print(f"[green]converted[/green] {got.converted} of {got.read} records {got.source_format or '?'} -> "
                  f"{got.target_format}: {dst}")
    if rej["total"]:
        reasons = "; ".join(f"{n} {r}" for r, n in sorted(rej["by_reason"].items(), key=lambda x: -x[1]))
        console.print(f"[yellow]skipped {rej['total']}[/yellow] ({reasons}): {rej['file']}", markup=True,
                      highlight=False)


@app.command("config")
def config_show(config: ConfigOpt = None, set_: SetOpt = None) -> None:
    """Print the resolved configuration (defaults < file < environment < --set)."""
    import yaml

    typer.echo(yaml.safe_dump(_config(config, set_).public_dict(), sort_keys=False))


from rubricforge.eval_cli import eval_app  # noqa: E402

app.add_typer(eval_app, name="eval")


def _cli_errors() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """(aborts, usage errors) of click and of the copy of click that typer >= 0.26 ships."""
    import click

    aborts: list[type[BaseException]] = [click.exceptions.Abort, typer.Abort]
    usage: list[type[BaseException]] = [click.ClickException]
    try:
        from typer._click.exceptions import ClickException
    except ImportError:
        pass
    else:
        usage.append(ClickException)
    return tuple(aborts), tuple(usage)


def main() -> None:
    """Entry point: user errors become one line on stderr and exit code 2."""
    aborts, usage_errors = _cli_errors()
    interrupts: tuple[type[BaseException], ...] = (KeyboardInterrupt, *aborts)
    try:
        app(standalone_mode=False)
    except UserError as err:
        typer.echo(f"error: {err}", err=True)
        sys.exit(2)
    except RunFailed as err:
        typer.echo(f"failed: {err}", err=True)
        sys.exit(1)
    except interrupts:
        typer.echo("interrupted: finished work is kept; run the same command again to resume", err=True)
        sys.exit(130)
    except usage_errors as err:
        err.show()  # type: ignore[attr-defined]  # every usage error is a ClickException (click's or typer's copy)
        sys.exit(2)


if __name__ == "__main__":
    main()
