"""KG pipeline steps with a scripted client: failed calls are recorded (never filled in), hidden
entities are masked for the generator, the deterministic question checks drop leaks and uncovered
hops, extraction keeps only triples one sentence states, the filters drop what they answer, long-form
RACE weights are normalised and the query is about the facts, and the export of hand-built examples
(DR Tulu short- and long-form rows, TRL prompt) loads back."""

from __future__ import annotations

import asyncio
import json

import pytest
import yaml

from rubricforge.llm.client import LLMResult
from rubricforge.pipelines.kg.extract import extract, triple_edges
from rubricforge.pipelines.kg.graph import EntityResolver
from rubricforge.pipelines.kg.filters import judge_verdict, run_filters
from rubricforge.pipelines.kg.longform import research_query, write_longform
from rubricforge.pipelines.kg.checks import answer_words_in, question_problem, uncovered_hops
from rubricforge.pipelines.kg.questions import compose, facts, write_question
from rubricforge.rubric_gen.race import RaceAnswer, to_race
from rubricforge.schema import KGEdge, KGExample, KGPath, Passage, Snippet
from support import drtulu


class Scripted:
    """Answers ``generate`` calls in order from ``answers`` (a dict = valid value, None = failed call)."""

    def __init__(self, *answers):
        self.answers, self.calls = list(answers), []

    async def generate(self, role, messages, output=None, stage="", **kw):
        self.calls.append((role, stage, messages[-1]["content"]))
        answer = self.answers.pop(0)
        if answer is None:
            return LLMResult(ok=False, error="no valid answer after 3 attempt(s): no JSON object found")
        return LLMResult(ok=True, value=output.model_validate(answer), text=json.dumps(answer))


class Tools:
    def __init__(self, snippets):
        self.snippets, self.queries = snippets, []

    async def asearch_snippets(self, query, k=None):
        self.queries.append(query)
        return self.snippets


PATH = KGPath(id="kgp-0000", shape="chain", branches=[["a", "b", "c"]], answer="c", hops=2,
              names={"a": "Srinagar", "b": "Kashmir", "c": "K2"}, descriptions={"a": "city in India"},
              passage_ids=["p1", "p2"],
              edges=[KGEdge(head="a", relation="is a city in the disputed region of", tail="b", passage_id="p1", source="text",
                            evidence="Srinagar is a city in the disputed Kashmir region."),
                     KGEdge(head="b", relation="has the Karakoram mountain", tail="c", passage_id="p2",
                            evidence="The Karakoram range of Kashmir holds K2, the second-highest mountain.")])
PROFILE = "Mountain on the China–Pakistan border. K2 is the second-highest mountain on Earth."
ALIASES = {"a": ["Srinagar"], "b": ["Kashmir", "Kashmir region"], "c": ["K2", "Mount Godwin-Austen"]}


def run(coro):
    return asyncio.run(coro)


def test_facts_mask_hidden_entities_and_their_aliases():
    text = facts(PATH, {"b": "X1", "c": "ANSWER"}, ALIASES)
    assert "Kashmir" not in text and "K2" not in text and "Srinagar" in text
    assert "the disputed X1." in text and "holds ANSWER" in text and "X1 --has the Karakoram mountain--> ANSWER" in text
    assert text.startswith('1. Srinagar --is a city in the disputed region of--> X1 (evidence: "Srinagar is a city in the disputed X1.")')


def test_uncovered_hops_need_a_content_word_of_each_hops_evidence():
    assert uncovered_hops("Which mountain of the Karakoram lies in the disputed region around Srinagar?", PATH) == []
    assert uncovered_hops("Which peak is in the Karakoram range?", PATH) == [1]
    assert uncovered_hops("What is the capital of Srinagar?", PATH) == [1, 2]  # the start's name is no condition


def _edge(head, relation, tail, evidence):
    return KGEdge(head=head, relation=relation, tail=tail, passage_id="p", source="text", evidence=evidence)


# subgraphs the default KG build sampled (seeds 0–2 of docs/results.md), with their default-corpus sentences
GIZA = KGPath(id="g", shape="chain", branches=[["suez", "egypt", "giza"]], answer="giza", hops=2,
              names={"suez": "Suez Canal", "egypt": "Egypt", "giza": "Giza"},
              descriptions={"suez": "Artificial sea-level waterway in Egypt", "egypt": "Country in North Africa",
                            "giza": "City in Greater Cairo, Egypt"},
              edges=[_edge("suez", "is an artificial sea-level waterway in", "egypt",
                           "The Suez Canal is an artificial sea-level waterway in Egypt, connecting the Mediterranean "
                           "Sea to the Red Sea through the Isthmus of Suez and dividing Africa and Asia."),
                     _edge("giza", "is the third-largest city in", "egypt",
                           "Giza is the third-largest city in Egypt by area and population, and is also the "
                           "eighteenth-largest city in Africa by population.")])
BENGHAZI = KGPath(id="b", shape="chain", branches=[["zambezi", "africa", "libya", "benghazi"]], answer="benghazi",
                  hops=3, names={"zambezi": "Zambezi", "africa": "Africa", "libya": "Libya", "benghazi": "Benghazi"},
                  descriptions={"africa": "Continent", "libya": "Country in North Africa",
                                "benghazi": "City in Cyrenaica, Libya"},
                  edges=[_edge("zambezi", "is the fourth-longest river in", "africa",
                               "The Zambezi is the fourth-longest river in Africa, the longest east-flowing river in "
                               "Africa and the largest flowing into the Indian Ocean from Africa."),
                         _edge("libya", "is the fourth-largest country in", "africa",
                               "With an area of almost 1.8 million km2 (700,000 sq mi), Libya is the fourth-largest "
                               "country in Africa and the Arab world, and the 16th-largest in the world."),
                         _edge("benghazi", "is the second-largest city in", "libya",
                               "Benghazi is the second-largest city in Libya as well as the largest city in "
                               "Cyrenaica, with an estimated population of 859,000 in 2023.")])
SOUTH_ASIA = KGPath(id="s", shape="branch", branches=[["mughal", "sa"], ["asia", "sa"]], answer="sa", hops=2,
                    names={"mughal": "Mughal Empire", "sa": "South Asia", "asia": "Asia"},
                    descriptions={"sa": "Sub-region of the Asian continent", "asia": "Continent"},
                    edges=[_edge("mughal", "was an early modern empire in", "sa",
                                 "The Mughal Empire was an early modern empire in South Asia."),
                           _edge("sa", "is the southern sub-region of", "asia",
                                 "South Asia is the southern sub-region of Asia.")])


@pytest.mark.parametrize("path, question", [
    (GIZA, "The Suez Canal is an artificial sea-level waterway in a country. Which city is the third-largest city "
           "in that country?"),
    (BENGHAZI, "The Zambezi is the fourth-longest river in a continent. Consider the country that is the "
               "fourth-largest country in that continent. Which city is the second-largest city in that country?"),
    (SOUTH_ASIA, "Which region is the southern sub-region of Asia, and is the one that the Mughal Empire was an "
                 "early modern empire in?"),
])
def test_the_template_states_every_hop_and_names_no_hidden_entity(path, question):
    assert compose(path) == question
    aliases = {n: [name] for n, name in path.names.items()}
    assert question_problem(question, path, aliases, path.descriptions[path.answer]) is None


def test_a_hop_is_covered_by_its_own_words_not_by_a_word_another_hop_shares():
    """Seed 2's default KG build retained this rewrite of the template: Benghazi is Libya's second-largest city,
    not Africa's, and the Libya hop is gone; only "largest", which the Benghazi hop shares, stood for it."""
    kenya = BENGHAZI.model_copy(update={
        "id": "k", "branches": [["benghazi", "libya", "africa", "kenya"]], "answer": "kenya",
        "names": {**BENGHAZI.names, "kenya": "Mount Kenya"},
        "edges": [BENGHAZI.edges[2], BENGHAZI.edges[1],
                  _edge("kenya", "is the second highest mountain in", "africa",
                        "Mount Kenya is the second highest mountain in Africa, after Kilimanjaro.")]})
    rewrite = "What is the second highest mountain in the continent that contains Benghazi as its second-largest city?"
    assert uncovered_hops(rewrite, kenya) == [2]
    assert uncovered_hops(compose(kenya), kenya) == []


ORANGE = KGPath(id="o", shape="chain", branches=[["orange", "sa", "africa", "kenya"]], answer="kenya", hops=3,
                names={"orange": "Orange River", "sa": "Southern Africa", "africa": "Africa", "kenya": "Mount Kenya"},
                descriptions={"kenya": "Mountain in Kenya"}, passage_ids=["p1", "p2", "p3"],
                edges=[_edge("orange", "is a river in", "sa", "The Orange River is a river in Southern Africa."),
                       _edge("sa", "is the southernmost region of", "africa",
                             "Southern Africa is the southernmost region of Africa."),
                       _edge("kenya", "is the second highest mountain in", "africa",
                             "Mount Kenya is the second highest mountain in Africa, after Kilimanjaro.")])
MOZAMBIQUE = KGPath(id="m", shape="branch", branches=[["channel", "ocean"], ["aden", "ocean"]], answer="ocean",
                    hops=2, names={"channel": "Mozambique Channel", "aden": "Gulf of Aden", "ocean": "Indian Ocean"},
                    descriptions={"ocean": "Oceanic division"}, passage_ids=["p1", "p2"],
                    edges=[_edge("channel", "is an arm of", "ocean",
                                 "The Mozambique Channel is an arm of the Indian Ocean."),
                           _edge("aden", "is a deepwater gulf of", "ocean",
                                 "The Gulf of Aden is a deepwater gulf of the Indian Ocean.")])


def test_a_relation_in_an_entitys_name_or_of_three_letters_is_still_a_condition():
    """Seed 1's default KG build dropped both templates as missing hop 1: every word of "is a river in" is in
    "Orange River", and "arm" of "is an arm of" was too short to count. A name alone still states nothing."""
    assert uncovered_hops(compose(ORANGE), ORANGE) == []
    assert uncovered_hops("The Orange River flows through a region. That region is the southernmost region of a "
                          "continent. Which mountain is the second highest mountain in that continent?", ORANGE) == [1]
    assert uncovered_hops(compose(MOZAMBIQUE), MOZAMBIQUE) == []
    assert uncovered_hops("Which division is the one that the Gulf of Aden is a deepwater gulf of, and touches the "
                          "Mozambique Channel?", MOZAMBIQUE) == [1]


def test_an_obfuscation_that_names_the_answer_is_undone():
    """Seed 1: the 1.5B hid "Mozambique Channel" as "the Indian Ocean strait", the answer."""
    aliases = {n: [name] for n, name in MOZAMBIQUE.names.items()}
    leaked = compose(MOZAMBIQUE).replace("Mozambique Channel", "Indian Ocean strait")
    rec = run(write_question(MOZAMBIQUE, aliases, "Oceanic division", Scripted({"question": leaked},
                                                                                {"question": leaked}), 100,
                                rewrite=False))
    assert rec["undone"][0] == "kg_obfuscate: question names the answer (Indian Ocean)"
    assert rec["question"] == compose(MOZAMBIQUE) and rec["drop"] is None and rec["obfuscated_ok"] is False


def test_an_obfuscation_that_changes_more_than_the_name_is_undone():
    """Seed 4 retained "Which river is the fifth-longest in the western region of a continent?" for the Don (the
    fifth-longest river of Europe, not of Western Europe): the template named Europe inside "Western Europe", the
    obfuscation rewrote the question to hide it. Seed 1 kept a run-on "Island country …, which country …"."""
    don = KGPath(id="d", shape="chain", branches=[["we", "europe", "don"]], answer="don", hops=2,
                 names={"we": "Western Europe", "europe": "Europe", "don": "Don (river)"},
                 descriptions={"we": "Region of Europe", "europe": "Continent", "don": "River in Russia"},
                 passage_ids=["p1", "p2"],
                 edges=[_edge("we", "is the western region of", "europe", "Western Europe is the western region of Europe."),
                        _edge("don", "is the fifth-longest river in", "europe",
                              "The Don is the fifth-longest river in Europe.")])
    aliases = {n: [name] for n, name in don.names.items()}
    merged = "Which river is the fifth-longest in the western region of a continent?"
    rec = run(write_question(don, aliases, "River in Russia", Scripted({"question": merged}), 100, rewrite=False))
    assert rec["undone"] == ["kg_obfuscate: changed more than the name (the question must go on 'is the western "
                             "region of a continent. Wh')"]
    assert rec["question"] == compose(don) and rec["drop"] == "question names an intermediate entity (Europe)"

    aliases = {n: [name] for n, name in GIZA.names.items()}
    run_on = ("Egypt's waterway to the Red Sea, an artificial sea-level waterway in a country, which city is the "
              "third-largest city in that country?")
    rec = run(write_question(GIZA, aliases, "City in Greater Cairo, Egypt", Scripted({"question": run_on}), 100,
                             rewrite=False))
    assert rec["question"] == compose(GIZA) and rec["drop"] is None and rec["obfuscated_ok"] is False
    assert rec["undone"][0].startswith("kg_obfuscate: changed more than the name")


def test_a_template_that_would_hide_an_entity_as_an_entity_is_dropped():
    """Seed 11: "Kabir is an important personality in an entity. Which language is the sacred language of that
    entity?" (Hinduism's description, "Range of Indian religious traditions", gives no noun)."""
    sanskrit = KGPath(id="k", shape="chain", branches=[["kabir", "hinduism", "sanskrit"]], answer="sanskrit", hops=2,
                      names={"kabir": "Kabir", "hinduism": "Hinduism", "sanskrit": "Sanskrit"},
                      descriptions={"hinduism": "Range of Indian religious traditions", "sanskrit": "Ancient language"},
                      passage_ids=["p1", "p2"],
                      edges=[_edge("kabir", "is an important personality in", "hinduism",
                                   "Kabir is an important personality in Hinduism."),
                             _edge("sanskrit", "is the sacred language of", "hinduism",
                                   "Sanskrit is the sacred language of Hinduism.")])
    client = Scripted()
    rec = run(write_question(sanskrit, {}, "Ancient language", client, 100, rewrite=False))
    assert rec["drop"] == "no noun says what a hidden entity is (Hinduism)" and client.calls == []


def test_a_start_takes_the_article_only_where_its_sentence_gives_it_to_its_name():
    """Seed 13 wrote "The Cologne is …" from "… people in the Cologne Bonn urban region"."""
    cologne = KGPath(id="c", shape="chain", branches=[["cologne", "germany", "berlin"]], answer="berlin", hops=2,
                     names={"cologne": "Cologne", "germany": "Germany", "berlin": "Berlin"},
                     descriptions={"germany": "Country in Central Europe", "berlin": "Capital of Germany"},
                     passage_ids=["p1", "p2"],
                     edges=[_edge("cologne", "is the fourth-most populous city of", "germany",
                                  "Cologne is the fourth-most populous city of Germany, with over 3.1 million people in "
                                  "the Cologne Bonn urban region."),
                            _edge("berlin", "is the most populous city in", "germany",
                                  "Berlin is the most populous city in Germany.")])
    assert compose(cologne).startswith("Cologne is the fourth-most populous city of a country.")


def test_an_llm_step_that_breaks_a_check_is_undone():
    """The template is obfuscated and rewritten by the generator; a rewrite that names the intermediate entity
    (or drops a hop) is not kept, the step is recorded, and the obfuscated question goes on."""
    aliases = {n: [name] for n, name in GIZA.names.items()}
    hidden = ("The artificial waterway joining the Mediterranean and the Red Sea is an artificial sea-level "
              "waterway in a country. Which city is the third-largest city in that country?")
    client = Scripted({"question": hidden}, {"question": "Which city is the third-largest in Egypt?"})
    rec = run(write_question(GIZA, aliases, "City in Greater Cairo, Egypt", client, 100))
    assert [c[1] for c in client.calls] == ["kg_obfuscate", "kg_rewrite"]  # the template needs no call
    assert rec["initial"] == compose(GIZA) and rec["obfuscated"] == hidden
    assert rec["question"] == hidden and rec["drop"] is None and rec["obfuscated_ok"] is True
    assert rec["undone"] == ["kg_rewrite: question names an intermediate entity (Egypt)"]
    plain = Scripted({"question": hidden})
    rec = run(write_question(GIZA, aliases, "City in Greater Cairo, Egypt", plain, 100, rewrite=False))
    assert [c[1] for c in plain.calls] == ["kg_obfuscate"] and rec["question"] == hidden  # kg.question_rewrite off


def test_question_steps_and_the_deterministic_drops():
    good = "Which mountain of the Karakoram lies in the disputed region that contains Srinagar?"
    client = Scripted({"question": good}, {"question": "Which Karakoram mountain is in the disputed region near a "
                                                        "city in India?"}, {"question": "Karakoram mountain in the "
                                                                                        "disputed region near an Indian city?"})
    rec = run(write_question(PATH, ALIASES, PROFILE, client, 100, "llm"))
    assert [c[1] for c in client.calls] == ["kg_question", "kg_obfuscate", "kg_rewrite"]
    assert "K2" not in client.calls[0][2] and "Kashmir" not in client.calls[0][2]  # masked for the generator
    assert "city in India" in client.calls[1][2]  # obfuscation is offered the corpus description
    assert rec["drop"] is None and rec["obfuscated_ok"] is True and rec["initial"] == good

    leak = run(write_question(PATH, ALIASES, PROFILE, Scripted({"question": "Is Mount Godwin-Austen in the Karakoram?"},
                                                      {"question": "Is Mount Godwin-Austen in the Karakoram?"}), 100, "llm"))
    assert leak["drop"] == "question names the answer (Mount Godwin-Austen)"
    words = run(write_question(PATH, ALIASES, PROFILE, Scripted({"question": "Which Austen, the mount of Godwin, is it?"},
                                                       {"question": "Which Austen, the mount of Godwin, is it?"}), 100, "llm"))
    assert words["drop"] == "question contains the answer's words (Mount Godwin-Austen)"
    hidden = run(write_question(PATH, ALIASES, PROFILE, Scripted({"question": "Which Kashmir peak is in the Karakoram?"},
                                                        {"question": "Which Kashmir peak is in the Karakoram?"}), 100, "llm"))
    assert hidden["drop"] == "question names an intermediate entity (Kashmir)"


@pytest.mark.parametrize("question, forms, given", [
    # the default KG build's one retained row (issue 28): its answer, reordered and split by another word
    ("What is the name of the visible light spectrum that is produced by splitting a star with a prism or "
     "diffraction grating?", ["Visible spectrum"], "Visible spectrum"),
    ("Which empire's rulers built the Colosseum in Rome?", ["The Roman Empire"], None),  # "roman" is not "rome"
    ("Which states of the union did the war divide?", ["United States"], None),  # "united" is missing
    ("Which states were united by the treaty?", ["United States"], "United States"),
    ("Which river of Paris floods?", ["Paris"], None),  # one word: names_in's case
    ("Which mountains of the Karakoram are highest?", ["Karakoram Mountains", "K2"], "Karakoram Mountains"),
])
def test_answer_words_in_the_question(question, forms, given):
    assert answer_words_in(question, forms) == given


def test_a_failed_generator_call_is_recorded_not_filled_in():
    rec = run(write_question(PATH, ALIASES, PROFILE, Scripted(None), 100, "llm"))
    assert rec["question"] is None and rec["initial"] is None
    assert rec["drop"].startswith("generation failed: no valid answer after 3 attempt(s)")
    passage = Passage(id="p1", title="Srinagar", text="Srinagar is a city in Kashmir.")
    ext = run(extract(passage, Scripted(None), 100))
    assert ext["triples"] == [] and ext["error"].startswith("no valid answer")


def test_extraction_keeps_only_triples_one_sentence_states():
    passage = Passage(id="p1", title="Srinagar", text="Srinagar is a city in Kashmir. It was a rivalry. Srinagar "
                                                       "hosts a festival. Kashmir has lakes.")
    triples = [{"head": "Srinagar", "relation": "city in", "tail": "Kashmir"},
               {"head": "Srinagar", "relation": "married", "tail": "Kashmir"},  # both names, not the relation
               {"head": "Srinagar", "relation": "twinned with", "tail": "Paris"},  # not in the passage
               {"head": "It", "relation": "was", "tail": "a rivalry"},  # not a name
               {"head": "Srinagar", "relation": "has lakes in", "tail": "Kashmir"}]  # two sentences, not one
    rec = run(extract(passage, Scripted({"triples": triples}), 100))
    assert rec["triples"] == triples[:1] and rec["ungrounded"] == triples[1:] and rec["error"] is None
    edges = triple_edges(passage, rec["triples"], EntityResolver())
    assert [(e.relation, e.evidence, e.source) for e in edges] == [("city in", "Srinagar is a city in Kashmir.", "llm")]


QUESTION = "Which mountain of the Karakoram lies in the disputed region that contains Srinagar?"
SNIPPETS = [Snippet(id="s1", passage_id="p9", title="Himalayas", text="A mountain range.")]


@pytest.mark.parametrize("answers,drop", [
    ([{"answer": "K2"}], "answered closed-book by the judge"),
    ([{"answer": "Everest"}, {"answer": "Mount Godwin-Austen"}], "answered from one search call"),
    ([{"answer": "Everest"}, {"answer": "Nanga Parbat"}, {"derivable": True, "unique": False, "reason": "two peaks"}],
     "answer not unique: two peaks"),
    ([{"answer": "Everest"}, {"answer": "Nanga Parbat"}, {"derivable": False, "unique": True, "reason": "odd"}],
     "not derivable from the hop facts: odd"),
    ([None], "direct_answer unscored: the judge failed (no valid answer after 3 attempt(s): no JSON object found)"),
    ([{"answer": "Everest"}, {"answer": "Nanga Parbat"}, {"derivable": True, "unique": True, "reason": "fine"}], None),
])
def test_filters_drop_with_their_reason(answers, drop):
    client, tools = Scripted(*answers), Tools(SNIPPETS)
    rec = run(run_filters(QUESTION, PATH, ALIASES["c"], ["p2"], client, tools,
                          ["direct_answer", "single_retrieval", "plausibility"], 100))
    assert rec["drop"] == drop and len(rec["results"]) == len(answers) and not client.answers
    assert all(role == "judge" for role, _, _ in client.calls)
    if len(answers) == 3:  # the derivation judge sees each hop's relation and evidence
        assert "Kashmir --has the Karakoram mountain--> K2 (evidence: \"The Karakoram range" in client.calls[2][2]
        verdict = "derivable, unique" if drop is None else "not unique" if "unique" in drop else "not derivable"
        assert judge_verdict(rec["results"]) == verdict
    if len(answers) > 1:
        assert tools.queries == [QUESTION] and rec["answer_passage_retrieved"] is False


def _longform(weights, crit_weight=1.0):
    crit = [{"criterion": "Covers the chain", "explanation": "all hops", "weight": crit_weight}]
    return {"dimension_weight": weights,
            "criterions": {d: crit for d in ("comprehensiveness", "insight", "instruction_following", "readability")}}


def _to_race(answer):
    return to_race(RaceAnswer.model_validate(answer), "q")


def test_race_weights_are_normalised_and_degenerate_answers_fail():
    race = _to_race(_longform({"comprehensiveness": 2, "insight": 1, "instruction_following": 1, "readability": 0}))
    assert race.dimension_weight == {"comprehensiveness": 0.5, "insight": 0.25, "instruction_following": 0.25,
                                     "readability": 0.0}
    zero = {"comprehensiveness": 0, "insight": 0, "instruction_following": 0, "readability": 0}
    assert _to_race(_longform(zero)) == "every dimension weight is zero or negative"
    rec = run(write_longform(PATH, QUESTION, Scripted(_longform(zero)), 300))
    assert rec["race"] is None and rec["raw_weights"] == zero
    ok = run(write_longform(PATH, QUESTION, Scripted(_longform({**zero, "insight": 1}, 0.5)), 300))
    assert ok["error"] is None and ok["race"]["criterions"]["insight"][0]["weight"] == 0.5


def test_the_research_query_is_the_question_with_a_report_request():
    """Seed 0's default KG build: the 1.5B wrote the query "What does the given facts establish and how do they
    bear on one another?" — the prompt's own words, about nothing. The query is now the retained question."""
    question = ("What is the name of the westernmost federal subject of the country where Ufa is the tenth-most "
                "populous city?")
    client = Scripted(_longform({"comprehensiveness": 1, "insight": 1, "instruction_following": 1, "readability": 1}))
    rec = run(write_longform(PATH, question, client, 300))
    assert rec["race"]["query"] == research_query(question)
    assert rec["race"]["query"].startswith(question) and "bear on one another" not in rec["race"]["query"]
    assert "Correct answer: K2" in client.calls[0][2] and question in client.calls[0][2]


def test_export_of_examples_with_and_without_race_rubrics(tmp_path):
    from datasets import load_from_disk

    from rubricforge.export.dataset import write_export
    from rubricforge.export.kg import kg_features, kg_view_rows
    from rubricforge.export.kg_card import render_kg_card

    race = _to_race(_longform({"comprehensiveness": 1, "insight": 1, "instruction_following": 1, "readability": 1}))
    base = dict(question=QUESTION, answer="K2", answer_aliases=["Mount Godwin-Austen"],
                key_entities=["Srinagar", "Kashmir", "K2"], hops=2, shape="chain", difficulty="medium", path=PATH)
    examples = [KGExample(id="kgp-0000", race_rubrics=race, research_query=race.query, **base),
                KGExample(id="kgp-0001", **base)]
    rows = kg_view_rows(examples, source="rubricforge_test")
    # exact-answer rows (the Hub's default config) and rubric rows apart: DR Tulu's rubric buffer needs rubrics
    assert [r["id"] for r in rows["drtulu"]] == ["kgp-0000--short", "kgp-0001--short"]
    assert [r["id"] for r in rows["drtulu_rubric"]] == ["kgp-0000--long"]
    long = json.loads(rows["drtulu_rubric"][0]["ground_truth"])
    assert rows["drtulu_rubric"][0]["dataset"] == "general_rubric" and len(long["rubrics"]) == 4
    assert set(long) == {"query", "rubrics"}
    assert long["rubrics"][0] == {"description": "Covers the chain: all hops", "weight": 0.25,
                                  "title": "comprehensiveness: Covers the chain"}
    # DR Tulu routes by dataset.lower() to its verifier names; rl_rag_exact_answer json.loads the ground truth
    # and accepts any answer of the list
    short = rows["drtulu"][0]
    assert short["dataset"].lower() == "rl_rag_exact_answer" and short["question_type"] == "exact_answer"
    assert json.loads(short["ground_truth"]) == ["K2", "Mount Godwin-Austen"]
    assert short["messages"] == [{"role": "user", "content": QUESTION}]
    # DR Tulu's rules (support.drtulu): every row routes to a verifier that reads its label; only the rubric
    # config can feed its rubric buffer
    rows_all = [*rows["drtulu"], *rows["drtulu_rubric"]]
    assert all(drtulu.routes(r) and drtulu.label_ok(r) for r in rows_all)
    assert drtulu.rubric_buffer_ok(rows["drtulu_rubric"]) and not drtulu.rubric_buffer_ok(rows["drtulu"])
    assert rows["trl"][0]["prompt"][1] == {"role": "user", "content": QUESTION}
    stats = {"run": "t", "corpus_source": "default", "corpus_hash": "h", "models": {"generator": "g", "judge": "j"},
             "counts": {"passages": 1, "extracted": 1, "extraction_failures": 0, "triples": 1, "ungrounded_triples": 0,
                        "paths": 2, "sampling_attempts": 9, "questions": 2, "longform": 1, "retained": 2},
             "graph": {"nodes": 3, "edges": 2, "edges_by_source": {"link": 2}, "top_relations": {"mentions": 2},
                       "nodes_by_kind": {"article": 3}, "components": 1, "largest_component": 3, "isolated_nodes": 0,
                       "degree": {"mean": 1.33, "max": 2, "histogram": {"1": 2, "2-3": 1}}},
             "sampling": {"attempts": 9, "rejected": {"necessity": 7}}, "drops": {}, "retained_rate": 1.0,
             "hops": {2: 2}, "shapes": {"chain": 2}, "difficulty": {"easy": 0, "medium": 2, "hard": 0},
             "cost": {"by_stage": {}, "by_role": {}, "total": {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                                              "cost_usd": 0, "cache_hits": 0, "failures": 0},
                      "per_retained_example": None, "per_tree": None, "by_stage_per_retained_example": {}},
             "empty_reason": None}
    out = write_export(tmp_path, rows, kg_features(), stats, render_kg_card, 2)
    ds = load_from_disk(str(tmp_path / "dataset" / "hf"))["train"]
    assert out["n_examples"] == 2 and ds["answer"] == ["K2", "K2"] and ds["race_rubrics"][1] == ""
    assert json.loads(ds["subgraph"][0])["branches"] == [["a", "b", "c"]]
    card = (tmp_path / "dataset" / "README.md").read_text()
    assert "| necessity | 7 |" in card and "| medium | 2 |" in card and "| 2 | 2 |" in card
    assert len(load_from_disk(str(tmp_path / "dataset" / "drtulu"))["train"]) == 2
    assert len(load_from_disk(str(tmp_path / "dataset" / "drtulu_rubric"))["train"]) == 1
    head = yaml.safe_load(card.split("---\n")[1])
    assert [c["config_name"] for c in head["configs"]] == ["default", "drtulu_rubric", "rubricforge", "trl"]
    assert head["configs"][0]["data_files"] == [{"split": "train", "path": "drtulu.parquet"}]
