"""`rubricforge train`: GRPO with the tools, HOTE and SCORE self-play, a rubric generator, SFT, DPO and its pairs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from rubricforge.cli.common import ConfigOpt, DatasetOpt, ModelOpt, SetOpt, console, finish, cli_config
from rubricforge.errors import require_file

if TYPE_CHECKING:
    from rubricforge.training.grpo import GRPORun

app = typer.Typer(no_args_is_help=True, help="Train agents with TRL: GRPO with the tools, cold-start SFT, DPO pairs.")
OutputOpt = Annotated[Optional[Path], typer.Option("--output-dir", help="Where the model goes (train.output_dir; "
                                                    "default <run_dir>/train/<stage>).")]
PresetOpt = Annotated[Optional[str], typer.Option(help="paper (App. B Table 5) | small-gpu | cpu (train.preset).")]
LossOpt = Annotated[Optional[str], typer.Option(help="grpo | dapo | gspo (train.loss).")]
PairsOpt = Annotated[Path, typer.Option("--pairs", help="The --out folder (or pairs.jsonl) of `train dpo-pairs`.")]
ResumeOpt = Annotated[Optional[Path], typer.Option(help="A checkpoint-N folder to resume from (default: the latest "
                                                        "in the run directory, the output folder).")]
GoldOpt = Annotated[Optional[str], typer.Option(help="A gold judge that is not the training judge (a YAML config "
                                                     "or a model name): every --gold-every steps it scores the policy "
                                                     "on held-out tasks (train.gold_judge).")]
GoldEveryOpt = Annotated[Optional[int], typer.Option(min=1, help="Steps between gold evaluations (train.gold_every, "
                                                                 "default 10).")]


def _gold(judge: str | None, every: int | None) -> dict[str, object]:
    """The gold-judge flags as config keys."""
    return {"train.gold_judge": judge, "train.gold_every": every}


def _noted(run: GRPORun) -> GRPORun:
    """The run, its note (what it costs beyond the policy) printed first."""
    if run.note:
        console().print(run.note)
    return run


@app.command("grpo")
def train_grpo(
    dataset: DatasetOpt,
    model: ModelOpt,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    preset: PresetOpt = None,
    loss: LossOpt = None,
    max_tool_turns: Annotated[Optional[int], typer.Option(help="Tool turns per rollout (train.max_tool_turns, "
                                                               "default 20).")] = None,
    output_dir: OutputOpt = None,
    rubrics: Annotated[Optional[str], typer.Option(help="static | evolving: the judge adds and prunes each task's "
                                                        "active rubrics every step (evolve.rubrics).")] = None,
    modes: Annotated[Optional[str], typer.Option(help="tool | no_tool | hybrid | hote: HOTE's tool / no-tool "
                                                      "modes and schedule (evolve.modes).")] = None,
    resume_from: Annotated[Optional[Path], typer.Option(help="A checkpoint-N folder to resume from (policy, rubric "
                                                              "bank, reward weights; default: the latest in the run "
                                                              "directory, the output folder).")] = None,
    gold_judge: GoldOpt = None,
    gold_every: GoldEveryOpt = None,
) -> None:
    """GRPO on a rubricforge dataset with the search / browse / scholar tools and the composite reward."""
    from rubricforge.jobs.train import grpo_job
    from rubricforge.training.grpo import build_grpo

    cfg = cli_config(config, set_, **{"train.preset": preset, "train.loss": loss, "train.max_tool_turns": max_tool_turns,
                                      "train.output_dir": output_dir, "evolve.rubrics": rubrics, "evolve.modes": modes,
                                      **_gold(gold_judge, gold_every)})
    finish(grpo_job(cfg, "grpo", _noted(build_grpo(cfg, dataset, model)), model, {"dataset": dataset}, resume_from))


@app.command("hote")
def train_hote(
    dataset: DatasetOpt,
    model: ModelOpt,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    proposer_model: Annotated[Optional[str], typer.Option(help="The proposer's initial weights (hote.proposer_model; "
                                                               "default: the solver's).")] = None,
    steps: Annotated[Optional[int], typer.Option(help="HOTE steps (hote.steps).")] = None,
    preset: Annotated[Optional[str], typer.Option(help="paper | small-gpu | cpu (train.preset), for both policies.")] = None,
    modes: Annotated[Optional[str], typer.Option(help="hote (default: 600 no-tool, then hybrid steps) | tool | no_tool | "
                                                      "hybrid (hote.modes).")] = None,
    gold_judge: GoldOpt = None,
    gold_every: GoldEveryOpt = None,
) -> None:
    """HOTE self-play (Algorithm 1): a proposer writes tasks from the solver's weaknesses, the solver answers,
    the fixed judge keeps the rubric bank; both policies train with GRPO. Resumes from <run_dir>/hote."""
    from rubricforge.jobs.train import hote_job
    from rubricforge.training.hote import HoteRun, step_summary

    cfg = cli_config(config, set_, **{"hote.proposer_model": proposer_model, "hote.steps": steps,
                                      "train.preset": preset, "hote.modes": modes, **_gold(gold_judge, gold_every)})
    run = HoteRun(cfg, dataset, model)
    h = cfg.hote
    console().print(f"HOTE: B={h.batch_size} tasks x G={h.group} rollouts, {h.combinations} proposer groups x "
                    f"G'={h.proposer_group} per step; judge calls per step: {h.batch_size} rubric updates + "
                    f"{h.batch_size * h.group} responses x |R| rubrics + {h.combinations} meta-rubric calls")
    console().print(run.cost.line())
    finish(hote_job(cfg, run, model, {"dataset": dataset}, on_step=lambda r: console().print(step_summary(r))))


@app.command("score")
def train_score(
    dataset: DatasetOpt,
    model: ModelOpt,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    preset: PresetOpt = None,
    output_dir: OutputOpt = None,
    resume_from: Annotated[Optional[Path], typer.Option(help="A checkpoint-N folder to resume from (policy, "
                                                              "dimension scheduler, harness, EMA baseline; default: "
                                                              "the latest in the run directory).")] = None,
    gold_judge: GoldOpt = None,
    gold_every: GoldEveryOpt = None,
) -> None:
    """SCORE self-play: one policy writes reports and selects the rubric they are judged by (KL 0.05)."""
    from rubricforge.jobs.train import grpo_job
    from rubricforge.training.score import build_score

    cfg = cli_config(config, set_, **{"train.preset": preset, "train.output_dir": output_dir,
                                      **_gold(gold_judge, gold_every)})
    finish(grpo_job(cfg, "score", _noted(build_score(cfg, dataset, model)), model, {"dataset": dataset}, resume_from,
                    also={"R_eval": "score/r_eval"}))


@app.command("from-gguf")
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

        gguf = ensure_model(cli_config(config, set_).llm.model_dir, EMBEDDED_POLICY)
    else:
        require_file(gguf, "GGUF file", "pass --gguf PATH to a .gguf file, or leave it out for the embedded model")
    console().print(f"policy model: {gguf_to_transformers(gguf, out)}")


@app.command("rubric-generator")
def train_rubric_generator(
    pairs: Annotated[Path, typer.Option("--pairs", "-p", help="Pairs JSONL (prefs import / prefs degrade); "
                                                              "trains on its train split.")],
    model: ModelOpt,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    preset: Annotated[Optional[str], typer.Option(help="paper (Prefs Table 3) | small-gpu | cpu (train.preset).")] = None,
    loss: LossOpt = None,
    output_dir: OutputOpt = None,
    resume_from: ResumeOpt = None,
) -> None:
    """GRPO of a rubric generator with the hybrid reward R_pref + R_llm + R_fmt (Prefs Eq. 1) by the judge role."""
    from rubricforge.jobs.train import grpo_job
    from rubricforge.training.rubric_generator import build_rubric_generator

    cfg = cli_config(config, set_, **{"train.preset": preset, "train.loss": loss, "train.output_dir": output_dir})
    finish(grpo_job(cfg, "rubric-generator", _noted(build_rubric_generator(cfg, pairs, model)), model,
                    {"pairs": pairs}, resume_from))


@app.command("sft")
def train_sft(
    data: Annotated[Path, typer.Option("--data", help='JSONL of {"messages": [...], "tools"?} trajectories '
                                                      "(rollouts sample writes them).")],
    model: ModelOpt,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    output_dir: OutputOpt = None,
    resume_from: ResumeOpt = None,
) -> None:
    """The cold-start SFT stage on trajectories (App. B Table 4 defaults; train.sft_args overrides)."""
    from rubricforge.jobs.train import trainer_job
    from rubricforge.training.sft import build_sft

    cfg = cli_config(config, set_, **{"train.output_dir": output_dir})
    finish(trainer_job(cfg, "sft", build_sft(cfg, data, model), model, {"data": data}, resume_from))


@app.command("dpo")
def train_dpo(pairs: PairsOpt, model: ModelOpt, config: ConfigOpt = None, set_: SetOpt = None,
              output_dir: OutputOpt = None, resume_from: ResumeOpt = None) -> None:
    """DPO on chosen / rejected pairs (MindDR Eq. 14; train.dpo_beta, train.dpo_args)."""
    from rubricforge.jobs.train import trainer_job
    from rubricforge.training.preference import build_dpo

    cfg = cli_config(config, set_, **{"train.output_dir": output_dir})
    finish(trainer_job(cfg, "dpo", build_dpo(cfg, pairs, model), model, {"pairs": pairs}, resume_from))


@app.command("self-sft")
def train_self_sft(pairs: PairsOpt, model: ModelOpt, config: ConfigOpt = None, set_: SetOpt = None,
                   output_dir: OutputOpt = None, resume_from: ResumeOpt = None) -> None:
    """Self-SFT on the chosen side of the pairs (MindDR Eq. 15; train.sft_args)."""
    from rubricforge.jobs.train import trainer_job
    from rubricforge.training.preference import build_self_sft

    cfg = cli_config(config, set_, **{"train.output_dir": output_dir})
    finish(trainer_job(cfg, "self-sft", build_self_sft(cfg, pairs, model), model, {"pairs": pairs}, resume_from))


@app.command("dpo-pairs")
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

    finish(build_pairs(cli_config(config, set_), dataset, rollouts, out, scores, progress=True))
