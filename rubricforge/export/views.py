"""Row layouts of the exported dataset and its two ready-made views.

**Main rows** (``hf/``, ``data.parquet``, ``data.jsonl``): one retained example each, the columns of
:data:`COLUMNS` (id, question, rubrics, decision, rubric source, topic and the provenance fields).

**DR Tulu view** (``drtulu/``, ``drtulu.jsonl``, ``drtulu.parquet``): DR Tulu's RL rows, written by the
converter :mod:`rubricforge.export.convert.drtulu` (``dataset`` = ``general_rubric``, its rubric verifier;
``ground_truth`` = JSON ``{"query", "rubrics"}``; ``source`` = this dataset's name; plus our ``id``). On the Hub
it is the ``default`` config, the one DR Tulu's ``--dataset_mixer_list <repo> 1.0`` loads.

**TRL view** (``trl/``, ``trl.parquet``): the main columns plus ``prompt`` (conversational: the App. D
agent system prompt, then the question) and ``system_prompt_hash``. TRL's GRPOTrainer hands every
column to the reward functions, so the rubrics travel with the prompt.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rubricforge.agent.prompt import agent_prompt, prompt_hash
from rubricforge.export.convert import drtulu
from rubricforge.extras import needs
from rubricforge.schema import Example

if TYPE_CHECKING:
    from datasets import Features

COLUMNS: dict[str, tuple[str, str]] = {  # main columns: type, meaning (the dataset card prints this)
    "id": ("string", "candidate id, `<tree id>--<rubric source>`"),
    "question": ("string", "the final research question (the verifier's revision for REVISE)"),
    "rubrics": ("list of struct", "`{id, type, description, weight, title, source_leaf_ids, evidence, passage_ids}`; "
                                  "type is factual or logical, weight in [-1, 1], passage_ids resolved from the evidence"),
    "decision": ("string", "the verifier's decision (KEEP or REVISE unless build.keep_decisions says otherwise)"),
    "rubric_source": ("string", "tree, closed-book or search (the DeepRubric §4.4 ablation)"),
    "topic": ("string", "topic label of the seed document"),
    "tree_id": ("string", "provenance: the evidence tree"),
    "leaf_ids": ("list of string", "provenance: the selected leaves"),
    "passage_ids": ("list of string", "provenance: every corpus passage behind the selected leaves and the rubrics"),
    "corpus_hash": ("string", "provenance: the corpus snapshot hash"),
    "models": ("string (JSON)", "provenance: role -> model name"),
    "prompt_hashes": ("string (JSON)", "provenance: prompt template -> content hash"),
}
def example_row(ex: Example) -> dict[str, Any]:
    p = ex.provenance
    return {
        "id": ex.id,
        "question": ex.question,
        "rubrics": [{"id": r.id, "type": r.type, "description": r.description, "weight": float(r.weight),
                     "title": r.title, "source_leaf_ids": list(r.source_leaf_ids), "evidence": list(r.evidence),
                     "passage_ids": list(r.passage_ids)} for r in ex.rubrics],
        "decision": ex.decision,
        "rubric_source": ex.rubric_source,
        "topic": ex.topic,
        "tree_id": p.tree_id,
        "leaf_ids": list(p.leaf_ids),
        "passage_ids": list(p.passage_ids),
        "corpus_hash": p.corpus_hash,
        "models": json.dumps(p.models, sort_keys=True),
        "prompt_hashes": json.dumps(p.prompt_hashes, sort_keys=True),
    }


def drtulu_row(ex: Example, source: str) -> dict[str, Any]:
    return drtulu.from_rubricforge(example_row(ex), source)


def trl_row(ex: Example) -> dict[str, Any]:
    return {**example_row(ex), "prompt": agent_prompt(ex.question), "system_prompt_hash": prompt_hash()}


def features() -> dict[str, Features]:
    """Explicit features per config, so an empty export still has the right schema."""
    with needs("data"):
        from datasets import Features, Value

    strings = [Value("string")]
    rubric = {"id": Value("string"), "type": Value("string"), "description": Value("string"),
              "weight": Value("float64"), "title": Value("string"), "source_leaf_ids": strings,
              "evidence": strings, "passage_ids": strings}
    main = {"id": Value("string"), "question": Value("string"), "rubrics": [rubric], "decision": Value("string"),
            "rubric_source": Value("string"), "topic": Value("string"), "tree_id": Value("string"),
            "leaf_ids": strings, "passage_ids": strings, "corpus_hash": Value("string"),
            "models": Value("string"), "prompt_hashes": Value("string")}
    message = [{"role": Value("string"), "content": Value("string")}]
    drtulu = {"id": Value("string"), "source": Value("string"), "question_type": Value("string"),
              "messages": message, "ground_truth": Value("string"), "dataset": Value("string")}
    trl = {**main, "prompt": message, "system_prompt_hash": Value("string")}
    return {"default": Features(main), "drtulu": Features(drtulu), "trl": Features(trl)}


def view_rows(examples: list[Example], source: str) -> dict[str, list[dict[str, Any]]]:
    """Rows of every config, in the examples' order: ``default``, ``drtulu``, ``trl``."""
    return {"default": [example_row(e) for e in examples], "drtulu": [drtulu_row(e, source) for e in examples],
            "trl": [trl_row(e) for e in examples]}
