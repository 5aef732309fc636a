"""The agent's tools (search / browse / scholar), snippet store and leakage guard.

Index tests run over a real index (real embeddings, real FAISS) of the first 200 articles of the
default corpus (built once per session by :func:`support.wiki_index.wiki_index_cfg`; the server tests reuse it).
"""

from __future__ import annotations

import json
import re
import threading

import pytest

from rubricforge.config import Config, load_config
from rubricforge.corpora.leakage import LeakageGuard, normalised_words
from rubricforge.corpora.snippets import SnippetStore, stable_id
from rubricforge.corpora.tools import ERROR_PREFIX, RetrievalError, ToolBox, _defuse, is_tool_error
from rubricforge.errors import UserError
from rubricforge.schema import Snippet
from support.wiki_index import BAYEUX, ENGLISH_LIT, wiki_index_cfg, with_tools

ID = r"[swp][a-z2-7]{10}"
SNIPPET_BLOCK = re.compile(rf"<snippet id=({ID})>Title: ([^\n]+)\nURL: (https://en\.wikipedia\.org/wiki/\S+)\n(.+?)</snippet>",
                           re.DOTALL)


@pytest.fixture(scope="session")
def wiki_cfg(tmp_path_factory) -> Config:
    return wiki_index_cfg(tmp_path_factory)


@pytest.fixture(scope="module")
def tools(wiki_cfg):
    with ToolBox.from_config(wiki_cfg) as tb:
        yield tb


def words_of(text: str, start: int, n: int) -> list[str]:
    return text.split()[start:start + n]


# ---------------------------------------------------------------- leakage guard (no index)


def test_normalisation_lowercases_strips_punctuation_and_collapses_whitespace():
    assert normalised_words("Don't  STOP—the U.S.\n isn't_here!") == ["dont", "stop", "the", "u", "s", "isnt", "here"]


def test_guard_matches_13_shared_words_but_not_12():
    question = ("Which embroidered cloth nearly seventy metres long depicts the events leading up to the "
                "Norman conquest of England")
    guard = LeakageGuard([question], n=13)
    words = question.split()
    shared13 = "Intro text. " + " ".join(words[2:15]).upper() + ", and more text follows here."
    shared12 = "Intro text. " + " ".join(words[2:14]) + " completely different ending words now."
    assert guard.leaks(shared13)
    assert not guard.leaks(shared12)
    assert not guard.leaks("an unrelated passage about musical instruments and their history in Europe")


def test_short_forbidden_texts_guard_nothing_and_are_counted():
    guard = LeakageGuard(["too short to have a thirteen word window"], n=13)
    assert not guard and guard.short_texts == 1
    assert not guard.leaks("too short to have a thirteen word window, repeated in full here")


# ---------------------------------------------------------------- snippet ids and store (no index)


def test_snippet_ids_are_stable_short_and_citation_safe():
    a = stable_id("search", "wiki-00200#1")
    assert a == stable_id("search", "wiki-00200#1")
    assert re.fullmatch(ID, a) and a.startswith("s")
    assert stable_id("scholar", "wiki-00200#1").startswith("p") and stable_id("browse", "wiki-00200").startswith("w")
    assert len({stable_id("search", f"p{i}") for i in range(20000)}) == 20000
    assert stable_id("search", "x") != stable_id("scholar", "x")


def _snip(i: int, text: str = "t") -> Snippet:
    return Snippet(id=stable_id("search", f"p{i}"), passage_id=f"p{i}", text=text)


def test_snippet_store_first_wins_lookup_and_json_round_trip(tmp_path):
    store = SnippetStore([_snip(1, "first")])
    assert store.add(_snip(1, "second")).text == "first"
    store.add(_snip(2))
    assert len(store) == 2 and _snip(2).id in store
    got = store.get_many([_snip(2).id, "snope", _snip(1).id])
    assert [s.passage_id if s else None for s in got] == ["p2", None, "p1"]
    again = SnippetStore.from_json(store.to_json())
    assert [s.model_dump() for s in again] == [s.model_dump() for s in store]
    store.save(tmp_path / "snippets.json")
    assert SnippetStore.load(tmp_path / "snippets.json").get(_snip(1).id).text == "first"


def test_snippet_store_load_errors_name_the_file(tmp_path):
    with pytest.raises(UserError, match="not found"):
        SnippetStore.load(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text('[{"id": 1}]')
    with pytest.raises(UserError, match="bad.json"):
        SnippetStore.load(tmp_path / "bad.json")


def test_snippet_store_keeps_everything_under_concurrent_adds():
    store = SnippetStore()
    def add(t: int) -> None:
        for i in range(500):
            store.add(_snip(t * 1000 + i))

    threads = [threading.Thread(target=add, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(store) == 4000


def test_protocol_tags_in_corpus_text_are_defused():
    text = _defuse("a </snippet> b <cite id=x> c < / webpage> d <b>bold</b> 3 < 4")
    assert "</snippet>" not in text and "<cite" not in text and "< / webpage" not in text
    assert "<b>bold</b> 3 < 4" in text


# ---------------------------------------------------------------- search over a real index


@pytest.mark.slow
def test_search_output_is_app_d_snippet_blocks(tools):
    out = tools.search(["Bayeux Tapestry embroidery"])
    blocks = SNIPPET_BLOCK.findall(out)
    assert len(blocks) == 3 and out.count("<snippet id=") == 3
    assert out == "\n".join(f"<snippet id={i}>Title: {t}\nURL: {u}\n{x}</snippet>" for i, t, u, x in blocks)
    first = tools.snippets.get(blocks[0][0])
    assert first.passage_id == BAYEUX and blocks[0][1] == "Bayeux Tapestry"
    assert blocks[0][2] == "https://en.wikipedia.org/wiki/Bayeux_Tapestry"


@pytest.mark.slow
def test_ids_are_stable_across_calls_and_toolboxes_and_the_store_keeps_what_was_shown(tools, wiki_cfg):
    first = tools.search_snippets(["Bayeux Tapestry embroidery"])
    again = tools.search_snippets(["Bayeux Tapestry embroidery"])
    with ToolBox.from_config(wiki_cfg) as other:
        third = other.search_snippets(["Bayeux Tapestry embroidery"])
    assert [s.id for s in first] == [s.id for s in again] == [s.id for s in third]
    assert all(s.id == stable_id("search", s.passage_id) for s in first)
    text = tools.search(["Bayeux Tapestry embroidery", "electric guitar pickups"])
    for sid, title, url, shown in SNIPPET_BLOCK.findall(text):
        stored = tools.snippets.get(sid)
        assert (stored.title, stored.url, stored.text) == (title, url, shown)


@pytest.mark.slow
def test_several_queries_keep_query_order_and_show_a_passage_once(tools):
    snippets = tools.search_snippets(["Bayeux Tapestry", "Bayeux Tapestry embroidery", "electric guitar"], k=2)
    ids = [s.id for s in snippets]
    assert len(ids) == len(set(ids))
    assert snippets[0].passage_id == BAYEUX and snippets[0].query == "Bayeux Tapestry"
    assert "Electric guitar" in [s.title for s in snippets[-2:]]


@pytest.mark.slow
def test_snippet_text_is_cut_at_a_word_boundary(wiki_cfg):
    with ToolBox.from_config(with_tools(wiki_cfg, snippet_chars=80)) as tb:
        snippets = tb.search_snippets(["English literature"], k=3)
    assert all(len(s.text) <= 80 for s in snippets)
    cut = [s for s in snippets if s.text.endswith(" \u2026")]
    assert cut and all(" " in s.text for s in cut)


# ---------------------------------------------------------------- leakage guard in search


@pytest.mark.slow
def test_leakage_guard_drops_a_passage_sharing_a_13_gram_and_refills(tools):
    top = tools.search_snippets(["Bayeux Tapestry embroidery"], k=3)
    bayeux = tools.retrievers["search"].page(BAYEUX).text
    question = "Explain: " + " ".join(words_of(bayeux, 10, 13)).upper() + "?! Discuss its history."
    tb = tools.fork(forbidden_texts=[question])
    guarded = tb.search_snippets(["Bayeux Tapestry embroidery"], k=3)
    assert len(guarded) == 3 and BAYEUX not in [s.passage_id for s in guarded]
    assert [s.id for s in guarded[:2]] == [s.id for s in top[1:]]
    assert tb.stats()["leakage_dropped"] == 1
    assert "Title: Bayeux Tapestry\n" not in tb.search("Bayeux Tapestry embroidery")


@pytest.mark.slow
def test_leakage_guard_keeps_a_passage_sharing_only_12_words(tools):
    bayeux = tools.retrievers["search"].page(BAYEUX).text
    question = "Explain " + " ".join(words_of(bayeux, 10, 12)) + " and compare with later medieval art forms"
    tb = tools.fork(forbidden_texts=[question])
    assert tb.search_snippets(["Bayeux Tapestry embroidery"], k=3)[0].passage_id == BAYEUX
    assert tb.stats()["leakage_dropped"] == 0


@pytest.mark.slow
def test_leakage_guard_looks_further_when_many_results_leak(tools):
    ranked = tools.retrievers["search"].search(["medieval art"], 12)[0]
    forbidden = [h.passage.text for h in ranked[:5]]  # the top 5 all leak; k=2 needs a second fetch
    tb = tools.fork(forbidden_texts=forbidden)
    got = tb.search_snippets(["medieval art"], k=2)
    assert [s.passage_id for s in got] == [h.passage.id for h in ranked[5:7]]
    assert tb.stats()["leakage_dropped"] == 5


# ---------------------------------------------------------------- browse


@pytest.mark.slow
def test_browse_by_document_passage_snippet_webpage_id_and_url(tools):
    page = tools.browse(ENGLISH_LIT)
    m = re.fullmatch(r"<webpage id=(w[a-z2-7]{10})>Title: English literature\nURL: (\S+)\n\n(.+)</webpage>", page,
                     re.DOTALL)
    assert m and m.group(2) == "https://en.wikipedia.org/wiki/English_literature"
    chunk0, chunk1 = tools.retrievers["search"].index.document(ENGLISH_LIT)
    assert m.group(3).startswith(chunk0.text[:200]) and m.group(3).endswith(chunk1.text[-200:])
    assert tools.browse(f"{ENGLISH_LIT}#1") == page
    assert tools.browse(m.group(2)) == page
    assert tools.browse("https://en.wikipedia.org/wiki/English literature#History") == page
    assert tools.browse(m.group(1)) == page  # a webpage id shown before
    sid = tools.search_snippets(["English literature"], k=1)[0].id
    assert tools.browse(sid) == page
    stored = tools.snippets.get(m.group(1))
    assert stored.tool == "browse" and stored.doc_id == ENGLISH_LIT and stored.text == m.group(3)


@pytest.mark.slow
def test_browse_errors_are_tool_error_strings(tools):
    out = tools.browse("wiki-99999")
    assert is_tool_error(out) and "wiki-99999" in out
    assert is_tool_error(tools.browse("  "))


@pytest.mark.slow
def test_browse_truncates_and_refuses_leaking_pages(wiki_cfg, tools):
    with ToolBox.from_config(with_tools(wiki_cfg, browse_chars=300)) as tb:
        out = tb.browse(ENGLISH_LIT)
    assert "[truncated: showing 300 of " in out and len(out) < 500
    text = tools.retrievers["search"].page(ENGLISH_LIT).text
    tb = tools.fork(forbidden_texts=[" ".join(words_of(text, 189, 14))])  # ends in the second chunk
    assert is_tool_error(tb.browse(ENGLISH_LIT)) and tb.stats()["leakage_dropped"] == 1


# ---------------------------------------------------------------- dispatcher and scholar


@pytest.mark.slow
def test_call_dispatches_like_a_tool_call_block(tools):
    direct = tools.search(["Bayeux Tapestry"])
    assert tools.call("search", {"query": "Bayeux Tapestry"}) == direct
    assert tools.call("search", {"query": ["Bayeux Tapestry"]}) == direct
    assert tools.call("Search", {"queries": ["Bayeux Tapestry"]}) == direct
    assert tools.call("search", json.dumps({"query": ["Bayeux Tapestry"]})) == direct
    assert tools.call("browse", {"url": "https://en.wikipedia.org/wiki/Bayeux_Tapestry"}) == tools.browse(BAYEUX)
    assert tools.call("browse", {"id": BAYEUX}) == tools.browse(BAYEUX)


@pytest.mark.slow
@pytest.mark.parametrize("name,arguments,says", [
    ("fetch", {"url": "x"}, "unknown tool"),
    ("search", {}, '"query"'),
    ("search", {"query": ""}, '"query"'),
    ("search", {"query": ["ok", 3]}, '"query"'),
    ("search", {"query": [f"q{i}" for i in range(11)]}, "at most 10 queries"),
    ("search", "{not json", "not valid JSON"),
    ("search", ["a list"], "JSON object"),
    ("browse", {"link": "x"}, '"url"'),
    ("browse", {"url": 7}, '"url"'),
    ("scholar", {"query": "x"}, "no scholarly index"),
])
def test_bad_calls_come_back_as_readable_tool_errors(tools, name, arguments, says):
    out = tools.call(name, arguments)
    assert out.startswith(ERROR_PREFIX) and says in out and "\n" not in out


@pytest.mark.slow
def test_scholar_uses_the_second_index_with_its_own_ids(wiki_cfg):
    cfg = with_tools(wiki_cfg, scholar_index_dir=wiki_cfg.tools.index_dir)
    with ToolBox.from_config(cfg, require_scholar=True) as tb:
        papers = tb.scholar_snippets(["Bayeux Tapestry"], k=2)
        out = tb.call("scholar", {"query": ["Bayeux Tapestry"]})
        assert [s.tool for s in papers] == ["scholar", "scholar"] and papers[0].id.startswith("p")
        assert f"<snippet id={papers[0].id}>" in out
        assert papers[0].id != tb.search_snippets(["Bayeux Tapestry"], k=1)[0].id
        assert tb.browse(papers[0].id).startswith("<webpage id=")


@pytest.mark.slow
def test_missing_scholar_index_is_a_user_error_only_when_required(wiki_cfg):
    with pytest.raises(UserError, match="tools.scholar_index_dir"):
        ToolBox.from_config(wiki_cfg, require_scholar=True)
    with ToolBox.from_config(wiki_cfg) as tb, pytest.raises(RetrievalError):
        tb.scholar_snippets(["x"])


def test_missing_index_is_a_user_error(tmp_path):
    cfg = load_config(None, [f"tools.index_dir={tmp_path / 'none'}"], environ={})
    with pytest.raises(UserError, match="corpus build"):
        ToolBox.from_config(cfg)


@pytest.mark.slow
def test_fork_has_its_own_store_and_leaves_the_shared_index_open(tools):
    fork = tools.fork()
    with fork:
        sid = fork.search_snippets(["Arabic music"], k=1)[0].id
    assert sid in fork.snippets
    assert tools.search_snippets(["Arabic music"], k=1)[0].id == sid  # still usable after the fork closed


@pytest.mark.slow
def test_cli_corpus_search_prints_app_d_blocks(wiki_cfg):
    from typer.testing import CliRunner

    from rubricforge.cli import app

    args = ["corpus", "search", "Bayeux Tapestry", "-k", "2", "--set", f"tools.index_dir={wiki_cfg.tools.index_dir}"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert len(SNIPPET_BLOCK.findall(result.output)) == 2
    result = CliRunner().invoke(app, [*args, "--scholar"])
    assert isinstance(result.exception, UserError)


@pytest.mark.slow
def test_an_open_index_can_be_shared_with_the_toolbox(wiki_cfg):
    from rubricforge.corpora.index_store import CorpusIndex

    with CorpusIndex.from_config(wiki_cfg) as index:
        with ToolBox.from_config(wiki_cfg, index=index) as tb:
            got = tb.search_snippets(["electric guitar"], k=2)
            assert tb.retrievers["search"].index is index
        assert [s.passage_id for s in got] == [h.passage.id for h in index.search(["electric guitar"], 2)[0]]
        assert index._store is not None  # the ToolBox did not close the caller's index


# ---------------------------------------------------------------- async search from an event loop


@pytest.mark.slow
def test_async_searches_leave_the_event_loop_and_match_sequential_ones(wiki_cfg):
    """Concurrent ``asearch`` / ``asearch_snippets`` / ``acall`` from one loop give the sequential results,
    and run off the loop: every retrieval waits until a heartbeat coroutine on the loop has ticked,
    which it could never do if a search held the loop (the wait's timeout only turns a hang into a
    failure; nothing is timed)."""
    import asyncio

    from rubricforge.corpora.index_store import CorpusIndex

    queries = ["Bayeux Tapestry", "electric guitar", "Arabic music", "English literature", "volcano eruption"]
    with CorpusIndex.from_config(wiki_cfg) as index, ToolBox.from_config(wiki_cfg, index=index) as tb:
        hits = [index.search([q], 3) for q in queries]
        texts = [tb.search(q) for q in queries]
        snippets = [tb.search_snippets(q) for q in queries]
        browsed = tb.call("browse", {"url": snippets[0][0].url})

        ticked, threads = threading.Event(), set()
        search_vectors = index.search_vectors

        def gated(vectors, k):
            threads.add(threading.get_ident())
            assert ticked.wait(60), "the heartbeat never ticked: a search blocked the event loop"
            return search_vectors(vectors, k)

        index.search_vectors = gated  # every search below passes here

        async def heartbeat(ticks: list[int]) -> None:
            for _ in range(3):
                await asyncio.sleep(0)
                ticks.append(1)
            ticked.set()

        async def main():
            ticks: list[int] = []
            results = await asyncio.gather(heartbeat(ticks), *(index.asearch([q], 3) for q in queries),
                                           *(tb.asearch(q) for q in queries),
                                           *(tb.asearch_snippets(q) for q in queries),
                                           tb.acall("browse", {"url": snippets[0][0].url}))
            return threading.get_ident(), ticks, results[1:]

        loop_thread, ticks, results = asyncio.run(main())
        n = len(queries)
        assert results[:n] == hits and results[n:2 * n] == texts and results[2 * n:3 * n] == snippets
        assert results[-1] == browsed
        assert ticks == [1, 1, 1] and threads and loop_thread not in threads
