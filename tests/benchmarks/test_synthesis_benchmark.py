"""The synthesis benchmark's ideal of a call graph (benchmarks/synthesis.py :func:`simulate`)."""

from __future__ import annotations

from support.paths import load_script


def _benchmark():
    return load_script("benchmarks/synthesis.py")


def test_the_ideal_of_a_call_graph_waits_for_dependent_calls_and_each_roles_slots():
    """Two trees, each two generator calls then a verification, one slot per role, 1 s per request: the
    interchangeable-slot ideal is 6 requests / 2 slots = 3 s and the longest chain 3 s, but the second
    tree's calls queue behind the first's on the generator slot and its verification comes last: 5 s."""
    simulate = _benchmark().simulate
    calls = [(0, "generator", 0.0, 1.0, 1), (0, "generator", 1.0, 2.0, 1), (0, "verifier", 2.0, 3.0, 1),
             (1, "generator", 0.0, 2.0, 1), (1, "generator", 2.0, 3.0, 1), (1, "verifier", 3.0, 4.0, 1)]
    assert simulate(calls, {"generator": 1, "verifier": 1}, 1.0) == 5.0
    assert simulate(calls, None, 1.0) == 3.0  # unlimited slots: the longest chain
    assert simulate(calls, {"generator": 2, "verifier": 1}, 1.0) == 4.0  # both verifications ready at 2 s: one waits
    # a call with two attempts holds its slot for both; calls answered before another was issued are its
    # dependencies, calls of another tree never are
    assert simulate([(0, "generator", 0.0, 2.0, 2), (1, "generator", 0.0, 1.0, 1)], {"generator": 1}, 1.0) == 3.0


def test_the_fake_merge_asks_only_what_its_rubrics_check():
    """The benchmark's fake merge passes the coverage check (so candidates reach the verifier and rows are retained);
    the pipeline fake's own question has a clause no rubric checks. Word overlap alone decides here (a zero
    embedding): the benchmark's question passes on it, without the embedding's help."""
    import json

    import numpy as np
    from support.pipeline_fake import TREE_MARKER, pipeline_answer

    from rubricforge.pipelines.tree.rules import coverage_failures
    from rubricforge.schema import Criterion

    tree = {"nodes": [{"query": "Stanley Kubrick"}], "leaves": [
        {"id": "L1", "query": "Kubrick films", "evidence": ["Kubrick directed 2001: A Space Odyssey in 1968."]},
        {"id": "L2", "query": "Kubrick style", "evidence": ["Kubrick was known for long takes and symmetry."]}]}
    body = {"messages": [{"role": "user", "content": f"{TREE_MARKER}{json.dumps(tree)}"}],
            "response_format": {"json_schema": {"name": "MergeOutput", "schema": {}}}}

    def failures(reply):
        answer = json.loads(reply.content)
        return coverage_failures(answer["question"], [Criterion.model_validate(r) for r in answer["rubrics"]],
                                 lambda texts: np.zeros((len(texts), 4)))

    fake = pipeline_answer(body)
    assert [f.split("'")[1] for f in failures(fake)] == ["which of its facets remain open"]
    covered = _benchmark().covered(fake)
    question = json.loads(covered.content)["question"]
    assert question.startswith("What does the evidence establish about Stanley Kubrick") and "facets" not in question
    assert failures(covered) == []
