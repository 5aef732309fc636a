"""Training building blocks: dataset columns and prompts, presets and loss types, the chat-template
check, the tool environment (per-rollout snippets, leakage guard), the reward metrics and adapters."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from rubricforge.agent.prompt import agent_system_prompt
from rubricforge.agent.rows import training_rows
from rubricforge.config import Config
from rubricforge.errors import UserError
from rubricforge.rewards.trajectory import parse_trajectory
from rubricforge.training.grpo import grpo_args
from rubricforge.training.presets import generation_args, preset_args, require_gpu
from rubricforge.training.rewards import step_metrics
from rubricforge.training.sft import sft_args
from support.config import derive
from support.paths import EXAMPLES



def write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# ------------------------------------------------------------ dataset


def test_rows_get_the_agent_prompt_and_keep_their_columns():
    rows = training_rows(EXAMPLES, ["composite"])
    assert [r["id"] for r in rows] == ["ex-kubrick", "ex-seurat"]
    assert rows[0]["prompt"] == [{"role": "system", "content": agent_system_prompt()},
                                 {"role": "user", "content": rows[0]["question"]}]
    assert rows[0]["rubrics"][0]["id"] == "c1"


def test_a_row_with_its_own_prompt_keeps_it(tmp_path):
    prompt = [{"role": "user", "content": "custom"}]
    rows = training_rows(write_rows(tmp_path / "d.jsonl", [{"id": "a", "question": "q", "rubrics": [{"id": "c1"}],
                                                            "prompt": prompt}]), ["composite"])
    assert rows[0]["prompt"] == prompt


@pytest.mark.parametrize("reward, row, column", [
    ("composite", {"id": "a", "question": "q"}, "rubrics"),
    ("format", {"id": "a", "rubrics": []}, "question"),
    ("report", {"id": "a", "question": "q", "race_rubrics": "{}"}, "reference_report"),
])
def test_a_missing_column_names_the_column_and_the_reward(tmp_path, reward, row, column):
    with pytest.raises(UserError, match=f"has no '{column}' column") as err:
        training_rows(write_rows(tmp_path / "d.jsonl", [row]), [reward])
    assert "train.reward" in str(err.value)


# ------------------------------------------------------------ presets


def test_paper_preset_is_table_5():
    args = preset_args("paper")
    assert (args["num_generations"], args["generation_batch_size"], args["learning_rate"], args["beta"],
            args["temperature"], args["top_p"], args["max_steps"], args["save_steps"]) == (8, 64, 1e-6, 0.0, 1.0,
                                                                                            1.0, 140, 5)
    assert args["loss_type"] == "grpo" and args["importance_sampling_level"] == "token"


def test_loss_types_map_to_trl():
    assert preset_args("small-gpu", "gspo")["importance_sampling_level"] == "sequence"
    assert preset_args("small-gpu", "dapo")["loss_type"] == "dapo"
    with pytest.raises(UserError, match="unknown loss type 'ppo'"):
        preset_args("paper", "ppo")
    with pytest.raises(UserError, match="unknown training preset"):
        preset_args("huge")


def test_every_preset_and_loss_is_a_valid_grpo_config(tmp_path):
    from trl import GRPOConfig

    for preset in ("paper", "small-gpu", "cpu"):
        for loss in ("grpo", "dapo", "gspo"):
            args = {**preset_args(preset, loss), "use_cpu": True, "bf16": False, "output_dir": str(tmp_path)}
            assert GRPOConfig(**args).num_generations == args["num_generations"]


def test_self_play_methods_bring_their_papers_settings(tmp_path):
    from rubricforge.training.grpo import paper_args
    from rubricforge.training.presets import method_args

    hote = method_args("hote", "paper")
    assert (hote["learning_rate"], hote["max_tool_calling_iterations"], hote["max_completion_length"], hote["loss_type"],
            hote["temperature"]) == (5e-7, 10, 16384, "dapo", 1.0)
    assert "max_completion_length" not in method_args("hote", "cpu")  # the smaller presets keep their sizes
    cpu = Config.model_validate({"train": {"preset": "cpu"}})  # as load_config builds it: only what was given is set
    assert grpo_args(cpu, "hote", **paper_args(cpu, "hote"))["max_tool_calling_iterations"] == 10
    mine = Config.model_validate({"train": {"preset": "cpu", "max_tool_turns": 4, "loss": "gspo"}})
    args = grpo_args(mine, "hote", **paper_args(mine, "hote"))  # what the config names itself wins
    assert (args["max_tool_calling_iterations"], args["importance_sampling_level"]) == (4, "sequence")
    # SCORE at the paper's size: 64 queries x 8 rollouts, 2 optimiser steps per batch, evaluator rows split evenly;
    # Table 2's "warmup 5 steps" are SCORE steps: 10 optimiser steps (the old code warmed up for 5, 2.5 SCORE steps)
    from rubricforge.training.score import score_args

    paper = Config.model_validate({"train": {"preset": "paper", "output_dir": str(tmp_path),
                                             "grpo_args": {"use_cpu": True, "bf16": False}}})
    score = score_args(paper)
    queries = score.generation_batch_size // score.num_generations
    assert (queries, score.max_completion_length, score.max_tool_calling_iterations) == (64, 4096, 10)
    assert score.steps_per_generation // score.gradient_accumulation_steps == 2 and score.warmup_steps == 10
    assert (score.generation_batch_size + queries) % score.steps_per_generation == 0
    assert score_args(derive(paper, "train.grpo_args={use_cpu: true, bf16: false, warmup_steps: 3}")).warmup_steps == 3


def test_score_defaults_are_the_papers_run(tiny_model):
    """SCORE §3.2 ("the solver and evaluator are implemented as two functionally distinct roles over a shared
    underlying actor"): the policy assesses by default; App. G Table 2's maximum input length 8,192 keeps longer
    writer prompts out of the training rows."""
    from rubricforge.training.model import load_tokenizer
    from rubricforge.training.score import fitting

    s = Config().score
    assert (s.assessor, s.max_input_tokens, s.warmup) == ("policy", 8192, 5)
    tok = load_tokenizer(str(tiny_model), None)
    rows = [{"prompt": [{"role": "user", "content": "word " * n}]} for n in (10, 5000)]
    kept, dropped = fitting(rows, tok, 1000)
    assert kept == rows[:1] and dropped == 1 and fitting(rows, tok, None) == (rows, 0)


def test_search_rl_trains_on_mean_only_advantages():
    from trl import GRPOConfig

    from rubricforge.training.grpo import reward_args, trl_config

    cfg = derive(Config(), "train.preset=cpu", "train.reward=search_rl", "train.output_dir=/tmp/unused")
    assert trl_config(GRPOConfig, grpo_args(cfg, **reward_args("search_rl"))).scale_rewards == "none"  # MindDR Eq. 2
    assert trl_config(GRPOConfig, grpo_args(cfg, **reward_args("composite"))).scale_rewards == "group"
    mine = derive(cfg, "train.grpo_args={scale_rewards: batch}")
    assert trl_config(GRPOConfig, grpo_args(mine, **reward_args("search_rl"))).scale_rewards == "batch"


def test_report_rl_keeps_its_prompts_and_trains_without_tools(tmp_path):
    from rubricforge.training.grpo import build_grpo

    with pytest.raises(UserError, match="Report-RL, which trains without tools") as err:
        build_grpo(derive(Config(), "train.reward=report", "evolve.modes=no_tool"), EXAMPLES, "unused")
    assert "leave evolve.modes at its default" in err.value.fix


def test_report_rl_prompts_ask_for_what_eqs_10_and_11_score():
    """MindDR §5.3 Eqs. 10-11 score the answer tag and <cite> markup; App. 8.2's printed prompt asks for neither,
    so the old rollouts started with v_tag = 1 and n_gen = 0 (dead R_format / R_cite)."""
    from rubricforge.rewards.minddr.report_rules import report_format_violations
    from rubricforge.training.grpo import report_rl_prompt

    row = {"prompt": [{"role": "system", "content": "You write reports."},
                      {"role": "user", "content": "Write a report. User Query: tides."}],
           "retrieval_data": "<snippet id=s1abc>Tides follow the Moon.</snippet>"}
    long = report_rl_prompt(row, "final_answer")["prompt"]
    assert long[0] == row["prompt"][0] and long[1]["content"].startswith("Write a report. User Query: tides.")
    assert "<final_answer> and </final_answer>" in long[1]["content"] and '<cite id="ID">' in long[1]["content"]
    short = report_rl_prompt({**row, "retrieval_data": ""}, "answer")["prompt"][1]["content"]
    assert "<answer> and </answer>" in short and "<cite" not in short
    assert row["prompt"][1]["content"] == "Write a report. User Query: tides."  # the row itself is left alone
    compliant = '<final_answer>\n# Tides\n\n<cite id="s1abc">Tides follow the Moon.</cite>\n</final_answer>'
    assert not report_format_violations(compliant, "final_answer").v_tag


def test_a_step_is_a_generation_batch_not_an_optimiser_step():
    from rubricforge.training.trl_seams import generation_step

    # the paper preset on one GPU: 64 rollouts per batch, 4 per optimiser step -> 16 optimiser steps per HOTE step
    assert [generation_step(g, 1, 16) for g in (0, 15, 16, 9599, 9600)] == [1, 1, 2, 600, 601]
    assert [generation_step(g, 2, 4) for g in (0, 1, 2)] == [1, 1, 2]  # 2 micro-batches per optimiser step
    assert generation_step(3, 1, 1, num_iterations=2) == 2  # each batch trained twice


def test_judge_cost_before_the_first_step_and_the_budget_stop(tmp_path):
    """Issue 26 item 5: the judge's calls, tokens and dollars per step and per run, from the rubric counts and the
    batch; over llm.max_cost_usd, `train grpo` stops with one line before the model loads."""
    from rubricforge.training.cost import grpo_cost
    from rubricforge.training.grpo import build_grpo

    rows = training_rows(EXAMPLES, [])
    rubrics = sum(len(r["rubrics"]) for r in rows) / len(rows)
    priced = {"backend": "litellm", "model": "openai/gpt-4o-mini", "max_tokens": 100}
    cfg = Config.model_validate({"llm": {"judge": priced}, "train": {"preset": "cpu"}})
    cost = grpo_cost(cfg, rows, 8, 8, 140, 1000)
    assert cost.calls == 64 * rubrics and cost.completion_tokens == 64 * rubrics * 100
    assert 64 * rubrics * 1000 < cost.prompt_tokens < 64 * rubrics * 2000  # each call reads a whole response
    assert cost.usd == pytest.approx(140 * (cost.prompt_tokens * 0.15e-6 + cost.completion_tokens * 0.6e-6))
    assert cost.line().startswith(f"judge openai/gpt-4o-mini: at most {64 * rubrics:,.0f} calls")
    evolving = Config.model_validate({**cfg.model_dump(), "evolve": {"rubrics": "evolving"}})
    assert grpo_cost(evolving, rows, 8, 8, 140, 1000).calls == 64 * (rubrics + 5) + 8  # + active rubrics, updates
    assert grpo_cost(Config(), rows, 8, 8, 140, 1000).usd is None  # the embedded judge has no price
    assert grpo_cost(derive(cfg, "train.reward=format"), rows, 8, 8, 140, 1000).calls == 0

    capped = derive(cfg, "llm.max_cost_usd=0.01", "train.grpo_args={max_steps: 30, max_completion_length: 4096}")
    with pytest.raises(UserError, match=r"the judge may cost up to \$[0-9.]+ over 30 steps .* llm.max_cost_usd = \$0.01"):
        build_grpo(capped, EXAMPLES, str(tmp_path / "no-model-needed"))


def test_gpu_presets_say_so_without_a_gpu():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    with pytest.raises(UserError, match="preset 'paper' needs a CUDA GPU") as err:
        grpo_args(derive(Config(), "train.preset=paper"))
    assert "--preset cpu" in str(err.value)
    require_gpu(preset_args("cpu"), "cpu", "-")
    with pytest.raises(UserError, match="SFT with the App. B Table 4 settings"):
        sft_args(Config(), Path("out"))


def test_vllm_generation_without_vllm_names_the_fix():
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed")
    with pytest.raises(UserError, match="needs vLLM") as err:
        generation_args("vllm-server", "http://localhost:8000")
    assert "train.generation=transformers" in str(err.value)
    assert generation_args("auto") == {"use_vllm": False}


# ------------------------------------------------------------ model


def test_a_template_without_tool_calls_is_refused_with_the_fix(tiny_model, tmp_path):
    from transformers import AutoTokenizer

    from rubricforge.training.model import load_tokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    tok.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                         "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    plain = tmp_path / "plain"
    tok.save_pretrained(plain)
    with pytest.raises(UserError, match="cannot render tool calls") as err:
        load_tokenizer(str(plain))
    assert "train.chat_template=qwen2.5" in str(err.value)
    fixed = load_tokenizer(str(plain), chat_template="qwen2.5")
    assert fixed.response_template is not None or fixed.response_schema is not None
    with pytest.raises(UserError, match="cannot load the tokenizer"):
        load_tokenizer(str(tmp_path / "missing"))


# ------------------------------------------------------------ environment


def test_each_rollout_has_its_own_snippets_and_its_question_is_kept_out(small_index_cfg):
    from rubricforge.agent.environment import environment_factory
    from rubricforge.corpora.index_store import CorpusIndex
    from rubricforge.corpora.tools import ToolBox

    index = CorpusIndex.from_config(small_index_cfg)
    passage = index.get(index.search(["Stanley Kubrick film"], 1)[0][0].passage.id)
    question = " ".join(passage.text.split()[:20])
    with ToolBox.from_config(derive(small_index_cfg, "tools.top_k=3"), index=index) as toolbox:
        make = environment_factory(toolbox)
        leaky, other = make(), make()
        leaky.reset(id="x", question=question)
        other.reset(id="y", question="Who painted the Mona Lisa?")
        shown = leaky.search([question])
        assert passage.id not in {s.passage_id for s in leaky.snippets}
        assert leaky.tool_stats["leakage_dropped"] >= 1 and leaky.tool_stats["search_calls"] == 1
        assert all(s.id in shown for s in leaky.snippets) and len(other.snippets) == 0
        other.search("Kubrick")
        assert passage.id in {s.passage_id for s in other.snippets}
        assert other.browse("no-such-page").startswith("[tool error]")
        leaky.reset(id="z", question="something else")
        assert len(leaky.snippets) == 0 and leaky.tool_stats.get("search_calls", 0) == 0
    index.close()


def test_environment_methods_are_exactly_the_three_tools():
    import inspect

    from rubricforge.agent.environment import ResearchEnvironment

    public = {n for n, _ in inspect.getmembers(ResearchEnvironment, inspect.isfunction) if not n.startswith("_")}
    assert public - {"reset"} == {"search", "browse", "scholar"}


# ------------------------------------------------------------ rewards


def test_step_metrics_average_scored_components_and_count_tools():
    class Env:
        def __init__(self, calls):
            self.tool_stats = {"search_calls": calls, "search_errors": 0}

    details = [{"value": 0.5, "components": {"rubric": 0.5, "format": 1.0}},
               {"value": None, "components": {"rubric": None, "format": 0.0}}]
    got = step_metrics("composite", details, [Env(2), Env(0)])
    assert got == {"composite/rubric/mean": 0.5, "composite/rubric/unscored": 1.0, "composite/format/mean": 0.5,
                   "composite/format/unscored": 0.0, "tools/search_calls": 1.0, "tools/search_errors": 0.0}


def test_trl_adapter_resolves_citations_through_the_environment_snippets():
    from rubricforge.corpora.snippets import SnippetStore
    from rubricforge.rewards.trl_rewards import rollouts_from
    from rubricforge.schema import Snippet

    class Env:
        snippets = SnippetStore([Snippet(id="s1aaaaaaaaa", passage_id="p", text="t")])

    got = rollouts_from(["a", "b"], {"question": ["q", "q"], "environments": [Env(), None]})
    assert got[0].snippets is Env.snippets and got[1].snippets is None
    assert "environments" not in got[0].example and got[0].example == {"question": "q"}


def test_reasoning_content_from_trls_parser_is_a_thought():
    traj = parse_trajectory([
        {"role": "assistant", "reasoning_content": "plan", "content": "",
         "tool_calls": [{"type": "function", "function": {"name": "search", "arguments": {"query": ["x"]}}}]},
        {"role": "tool", "name": "search", "content": "<snippet id=s1aaaaaaaaa>t</snippet>"},
        {"role": "assistant", "reasoning_content": "done", "content": "<answer>ok</answer>"}])
    assert [s.thinks for s in traj.steps] == [["plan"], ["done"]]
    assert traj.steps[0].tool_calls[0].valid and traj.answer == "ok"


def test_the_composite_is_none_for_trl_when_the_judge_is_down(tmp_path):
    from rubricforge.testing import FakeOpenAI, Reply
    from support.llm_fakes import litellm_llm_config

    from rubricforge.llm import LLMClient
    from rubricforge.rewards.scorer import RewardScorer
    from rubricforge.training.rewards import grpo_reward

    logged: dict[str, float] = {}
    with FakeOpenAI([Reply(status=503)]) as server:
        cfg = Config.model_validate({"llm": litellm_llm_config(tmp_path, server, max_retries=0)})
        client = LLMClient(cfg.llm)
        fn = grpo_reward(RewardScorer(cfg, client), "composite")
        rows = json.loads(EXAMPLES.read_text().splitlines()[0])
        completion = [{"role": "assistant", "content": "<think>x</think><answer>Kubrick.</answer>"}]

        async def go():
            try:
                return await fn(prompts=[[]], completions=[completion], question=[rows["question"]],
                                rubrics=[rows["rubrics"]], log_metric=lambda k, v: logged.__setitem__(k, v))
            finally:
                await client.aclose()

        assert asyncio.run(go()) == [None]
    assert fn.__name__ == "rubricforge_composite"
    assert logged["composite/unscored"] == 1.0 and logged["composite/rubric/unscored"] == 1.0
    assert logged["composite/format/mean"] > 0


# ------------------------------------------------------------ command line


def test_cli_errors_are_one_line_and_name_the_fix(tmp_path):
    from support.cli import assert_user_error, cli

    no_rubrics = write_rows(tmp_path / "d.jsonl", [{"id": "a", "question": "q"}])
    assert_user_error(cli("train", "grpo", "--dataset", str(no_rubrics), "--model", "m", "--preset", "cpu"),
                      "has no 'rubrics' column", "train.reward")
    assert_user_error(cli("train", "grpo", "--dataset", str(EXAMPLES), "--model", str(tmp_path / "none"), "--preset", "cpu"),
                      "cannot load the tokenizer")
    assert_user_error(cli("train", "grpo", "--dataset", str(EXAMPLES), "--model", "m", "--set", "train.loss=ppo"),
                      "train.loss")
    assert_user_error(cli("train", "sft", "--data", str(tmp_path / "none.jsonl"), "--model", "m"), "not found")
    assert_user_error(cli("rollouts", "sample", "--dataset", str(no_rubrics), "--model", str(tmp_path / "none"),
                          "--out", str(tmp_path / "r.jsonl")), "cannot load the tokenizer")
