"""Deterministic checks of a written question (MindDR §4.1: the answer follows from the subgraph's explicit
relations), run before the judge. :func:`question_problem` returns the first that fails as a drop reason
``"<category> (<detail>)"`` (the card counts categories), in this order:

1. **placeholder** — a mask the generator saw (``ANSWER``, ``X1``) or a blank (``[MASK]``, ``___``) is left in
   the question; **not one question** — no question mark, several, text after it, or "the answer is" in it.
2. **whole entity** — the answer is written, as a whole name, in the evidence of a hop it is an end of: not a
   word of a longer name ("Monarchy" in "Austro-Hungarian Monarchy").
3. **leaks** — the question names the answer or an alias (whole words), contains every content word of a
   multi-word answer form in any order (:func:`answer_words_in`), or names an intermediate entity.
4. **answer type** — the noun the question asks for (:func:`asked_type`: "Which *city* …", "… first *wife*?",
   *who*, *when*) agrees with the answer (:func:`type_disagreement`).
5. **hop conditions** — every hop's condition appears, obfuscated, in the question: a content word of its
   relation (compared by the first :data:`STEM` letters, the hop's entity names left out) is in the question
   outside the path's entity names (:func:`uncovered_hops`).
"""

from __future__ import annotations

import re

from rubricforge.pipelines.kg.graph import WORD, canonical_key, name_pattern, short_forms, whole_name
from rubricforge.schema import KGPath

STEM = 5  # content words compare by their first letters ("India" ~ "Indian")
_STOP = frozenset("""about above after also among and been before being between both from have into its more most
only other over since some such than that their them then there these they this those through under until very
what when where which while with would known called located""".split())
_FUNCTION = frozenset("a an and as at by de del der for from in la le of on or the to von with".split())
_SHORT = frozenset("are was has had its his her not but one two who".split())  # three-letter words of no relation
# the generator's masks in capitals only ("answer" as a word is none), blanks in any case
PLACEHOLDER = re.compile(r"\b(?:ANSWER|X\d)\b|(?i:\[(?:mask|blank|answer|entity)\]|<mask>)|_{3,}")
_WH = re.compile(r"\b(who|whom|whose|when|where|what|which)\b", re.IGNORECASE)
_TYPE_END = frozenset("""that which who whose whom where when in of on at by for from to with is was are were did does
do has had have located known called named and or as this these those can could would will be the a an""".split())
_TYPE_LEAD = re.compile(r"^(?:(?:is|was|are|were)\s+)?(?:(?:the|a|an)\s+)?(?:(?:name|title)\s+(?:of|for)\s+"
                        r"(?:the\s+|a\s+|an\s+|this\s+|that\s+)?)?", re.IGNORECASE)
_POSSESSIVE = re.compile(r"['’]s\s+((?:[a-z-]+\s+){0,2}[a-z-]+)\b")
GENERIC = frozenset("name entity thing one term item subject concept object answer option".split())
TIME = frozenset("year date decade century era period time".split())
PERSON = frozenset("person people individual figure man woman".split())
PLACE = frozenset("place location area spot".split())
# nouns that say how the answer relates to another entity: the hop's relation must state them, not the
# answer's own article ("wife" of Teresa, not Mary being someone's wife)
RELATIONAL = frozenset("""wife husband spouse son daughter father mother brother sister child children parent
successor predecessor heir founder creator author teacher student pupil partner sibling""".split())
_SYNONYMS = {"wife": {"wife", "husba", "spous", "marri"}, "husband": {"wife", "husba", "spous", "marri"},
             "spouse": {"wife", "husba", "spous", "marri"}, "founder": {"found"}, "successor": {"succe"},
             "predecessor": {"prede", "succe"}, "author": {"autho", "wrote", "writt"}, "creator": {"creat"}}
_PERSON_CUE = re.compile(r"\b(?:he|she|his|her|born|died)\b|\(\s*(?:born\s+|c\.\s*)?\d{3,4}\s*[–-]", re.IGNORECASE)
_PLACE_CUE = re.compile(r"\b(?:city|town|village|country|state|region|province|river|mountain|island|capital|"
                        r"located|area|municipality|county|district|lake|sea|ocean|continent|peninsula|valley|"
                        r"desert|territory|kingdom|empire|nation|republic|site|building|range)\b", re.IGNORECASE)


def _stems(text: str) -> set[str]:
    return {w[:STEM] for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) >= 4 and w not in _STOP}


def _singular(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def not_one_question(question: str) -> str | None:
    """What makes ``question`` more or less than one question — no question mark, several, or text after it (a
    rewrite that appended "The answer is …") — or None."""
    text = question.strip()
    if text.count("?") != 1:
        return f"{text.count('?')} question marks"
    if tail := text[text.index("?") + 1:].strip():
        return f"text after the question: {tail[:40]}"
    if re.search(r"\bthe answer is\b", text, re.IGNORECASE):
        return "it states an answer"
    return None


def names_in(text: str, names: list[str]) -> list[str]:
    """The names (case-insensitive, whole words) that ``text`` contains."""
    return [n for n in names if n and name_pattern(n).search(text)]


def _words(text: str) -> list[str]:
    """The canonical words of ``text`` (:func:`~rubricforge.pipelines.kg.graph.canonical_key`), a plural's
    final "s" dropped."""
    return [w[:-1] if len(w) > 3 and w.endswith("s") else w for w in canonical_key(text).split()]


def answer_words_in(question: str, forms: list[str]) -> str | None:
    """The first answer form of two or more content words that all appear as words in ``question``, in any
    order and with other words between (a one-word form is :func:`names_in`'s)."""
    asked = set(_words(question))
    for form in forms:
        content = {w for w in _words(form) if w not in _FUNCTION}
        if len(content) >= 2 and content <= asked:
            return form
    return None


def _relation_stems(text: str) -> set[str]:
    """The content words of a relation, three letters or more ("an *arm* of", "*led* by")."""
    return {w[:STEM] for w in re.findall(r"[a-z0-9]+", text.lower())
            if len(w) >= 3 and w not in _STOP and w not in _FUNCTION and w not in _SHORT}


def uncovered_hops(question: str, path: KGPath) -> list[int]:
    """1-based hops whose condition the question leaves out. A hop's condition is the content words of its
    relation that are not words of its two entities' names; when every one is ("The Orange River *is a river in*
    Southern Africa"), the relation's words themselves; when it has none, its evidence's words. The question is
    read with the path's entity names taken out, so a name does not state a relation ("Orange River" is no
    "river in"). When the hop has words no other hop's condition has, one of those must be there: "largest" of
    "is the second-largest city in" must not stand for "is the fourth-largest country in" (a rewrite that
    dropped that hop kept it). Any evidence word would let "largest" in the Zambezi's sentence stand for "is
    the fourth-longest river in"."""
    bare = question
    for name in sorted({n for n in path.names.values() if n}, key=len, reverse=True):
        bare = name_pattern(name).sub(" ", bare)
    asked = _relation_stems(bare)
    conditions = []
    for e in path.edges:
        names = _stems(f"{path.names.get(e.head, e.head)} {path.names.get(e.tail, e.tail)}")
        relation = _relation_stems(e.relation)
        conditions.append((relation - names) or relation or (_stems(e.evidence) - names))
    out = []
    for i, condition in enumerate(conditions):
        others = set().union(*conditions[:i], *conditions[i + 1:])
        if not ((condition - others) or condition) & asked:
            out.append(i + 1)
    return out


def placeholder(question: str) -> str | None:
    """A mask or blank left in the question, or None."""
    m = PLACEHOLDER.search(question)
    return m.group(0) if m else None


def name_forms(name: str, aliases: list[str]) -> list[str]:
    """A node's surface forms with their short forms (:func:`~rubricforge.pipelines.kg.graph.short_forms`)."""
    return list(dict.fromkeys(f for a in [name, *aliases] for f in short_forms(a)))


def written_whole(text: str, forms: list[str]) -> bool:
    """Whether ``text`` writes one of ``forms`` as a whole name: as the form writes it (a name's case: "dual
    monarchy" does not name "Monarchy") and not as a word of a longer name."""
    toks = WORD.findall(text)
    for form in forms:
        want = WORD.findall(form)
        for i in range(len(toks) - len(want) + 1):
            if want and toks[i:i + len(want)] == want and whole_name(toks, i, i + len(want)):
                return True
    return False


def part_of_a_name(path: KGPath, aliases: dict[str, list[str]]) -> str | None:
    """The evidence of a hop ending at the answer that does not write the answer as a whole name, or None."""
    forms = name_forms(path.names[path.answer], aliases.get(path.answer, []))
    for e in path.edges:
        if path.answer in (e.head, e.tail) and not written_whole(e.evidence, forms):
            return f"{path.names[path.answer]} in: {e.evidence[:80]}"
    return None


def asked_type(question: str) -> str | None:
    """The kind of thing the question asks for: ``"year"`` (when, what year), ``"person"`` (who), ``"place"``
    (where), else the head noun after what / which ("What is the name of the *city* that …" -> ``"city"``, "What
    was Teresa's first *wife*?" -> ``"wife"``), singular; None when there is none."""
    m = _WH.search(question)
    if m is None:
        return None
    wh, rest = m.group(1).lower(), question[m.end():].strip()
    if wh in ("who", "whom", "whose"):
        return "person"
    if wh == "when":
        return "year"
    if wh == "where":
        return "place"
    rest = rest[_TYPE_LEAD.match(rest).end():]  # type: ignore[union-attr]  # the pattern matches empty
    nouns: list[str] = []
    for tok in re.findall(r"[\w'’-]+|[^\w\s]", rest):
        if tok[:1].isupper() and not nouns:
            continue  # an adjective of a name: "Which Italian city"
        if not re.fullmatch(r"[a-z-]+", tok) or tok in _TYPE_END:
            break
        plural = tok.endswith("s") and not tok.endswith("ss")
        if nouns and (plural or tok.endswith("ed")):
            break  # a verb: "Which river flows", "Which empire ruled"
        nouns.append(tok)
        if plural or len(nouns) == 3:
            break  # a plural ends the noun phrase: "Which cities host"
    if not nouns and (pos := _POSSESSIVE.search(rest)):
        nouns = pos.group(1).split()
        nouns = nouns[:next((i for i, w in enumerate(nouns) if w in _TYPE_END), len(nouns))]
    return _singular(nouns[-1]) if nouns else None


_PREDICATE = re.compile(r"^\s*(?:is|was|are|were)\s+(?:the|a|an)\s+((?:[a-z-]+\s+){0,3}?)([a-z-]+)\s+"
                        r"(?:in|of|on|at|for|from|to|by|that|which|with)\b")


def predicated_type(question: str) -> str | None:
    """The noun the question predicates of what it asks for: "Which country *is the third largest city* in …"
    -> ``"city"``; None when it predicates none."""
    m = _WH.search(question)
    if m is None or m.group(1).lower() not in ("what", "which"):
        return None
    rest = question[m.end():]
    noun = re.match(r"\s*(?:[A-Z][\w-]*\s+)*[a-z-]+", rest)  # the asked noun ("Italian cities")
    if noun is None:
        return None
    pred = _PREDICATE.match(rest[noun.end():])
    return _singular(pred.group(2)) if pred else None


def described_noun(description: str) -> str | None:
    """The head noun of a corpus description, what the answer is: the last word before the first preposition,
    comma, dash, participle or adverb ("Capital city of Tatarstan, Russia" -> ``"city"``, "Country spanning Africa
    and Asia" -> ``"country"``, "Country primarily in Western Europe" -> ``"country"``); None when there is none."""
    head = re.split(r"\s(?:of|in|on|at|for|from|with|by|and|or|that|who|which|[a-z]+ing|primarily|mainly|mostly|"
                    r"largely|partly|chiefly|predominantly|formerly|historically|traditionally|officially)\s|"
                    r"[,;:(]|\s[–—-]\s", description.strip())[0]
    words = re.findall(r"[A-Za-z]+", head)
    return words[-1].lower() if words else None


def type_disagreement(question: str, path: KGPath, answer_profile: str) -> str | None:
    """Why the answer is not the kind of thing the question asks for (:func:`asked_type`) or says it is
    (:func:`predicated_type`), or None. ``answer_profile`` is the answer article's description and first
    sentence. A time asks for a digit in the answer's name; a person for a
    person cue (he/she, born, life dates) in the profile; a place for a place word; a relational noun ("wife",
    "founder") for its word in the relation of a hop whose head is the answer (that the answer is *someone's*
    wife says nothing); any other noun for its word
    (first :data:`STEM` letters) in the profile or in those hops' relations. Generic nouns ("name", "entity")
    and questions without a noun pass."""
    for kind in dict.fromkeys(k for k in (asked_type(question), predicated_type(question)) if k):
        if wrong := _disagrees(kind, path, answer_profile):
            return wrong
    return None


def _disagrees(kind: str, path: KGPath, answer_profile: str) -> str | None:
    kind = kind.split("-")[-1]  # "sub-region" is a region
    if kind in GENERIC:
        return None
    answer = path.names[path.answer]
    # a relation describes its head ("Lake Van *is the largest lake in* Turkey" says nothing of what Turkey is)
    relations = " ".join(e.relation for e in path.edges if e.head == path.answer)
    if kind in TIME:
        ok = bool(re.search(r"\d", answer)) or "century" in answer.lower()
    elif kind in PERSON:
        ok = bool(_PERSON_CUE.search(answer_profile)) or kind in _stems(answer_profile)
    elif kind in PLACE:
        ok = bool(_PLACE_CUE.search(f"{answer_profile} {relations}"))
    elif kind in RELATIONAL:
        ok = bool(_SYNONYMS.get(kind, {kind[:STEM]}) & {w[:STEM] for w in re.findall(r"[a-z]+", relations.lower())})
    else:
        ok = kind[:STEM] in {_singular(w)[:STEM] for w in re.findall(r"[a-z]+", f"{answer_profile} {relations}".lower())}
    return None if ok else f"asks for a {kind}; {answer} is not one by its article or relation"


def question_problem(question: str, path: KGPath, aliases: dict[str, list[str]], answer_profile: str) -> str | None:
    """The first deterministic check (module docstring) that ``question`` fails, as a drop reason; None if none."""
    names = path.names
    answers = aliases.get(path.answer, []) + [names[path.answer]]
    if mask := placeholder(question):
        return f"placeholder in the question ({mask})"
    if extra := not_one_question(question):
        return f"not one question ({extra})"
    if part := part_of_a_name(path, aliases):
        return f"answer is not a whole entity of the path ({part})"
    if leaked := names_in(question, answers):
        return f"question names the answer ({leaked[0]})"
    if given := answer_words_in(question, answers):
        return f"question contains the answer's words ({given})"
    if leaked := names_in(question, [names[n] for n in path.intermediates()]):
        return f"question names an intermediate entity ({leaked[0]})"
    if wrong := type_disagreement(question, path, answer_profile):
        return f"answer type disagrees ({wrong})"
    if missed := uncovered_hops(question, path):
        return f"question misses a hop's condition (hop {', '.join(map(str, missed))})"
    return None
