"""The local host: a documented tool-search agent that needs no model and no network.

It behaves like a host in the ways that matter to the measurements, with
mechanics simple enough to state here:

1. **Search.** It ranks the offered tools by BM25 (``bm25_k1`` = 1.2 and ``bm25_b`` =
   0.75 by default) of the prompt's content words against each tool's name, title and
   description (words lowercased, identifiers split, a light plural stemmer), and
   surfaces the top ``search_k`` tools with a positive score. A tool whose metadata
   shares no word with the prompt is never surfaced: an unrelated decoy is almost never
   chosen, and neutral placeholder names and descriptions lower selection.
2. **Decide.** It uses a tool with probability
   ``sigmoid(sharpness * (best_score - threshold) + prompt_sd * z_prompt)``,
   otherwise answers by itself (it declines). ``z_prompt`` is a standard normal drawn
   from the prompt's seed, shared by every repeat (and arm) of the prompt, so repeats
   vary (the draw uses the unit's seed) and are correlated (they share ``z_prompt``).
3. **Choose.** The goal tool is drawn from the surfaced tools with probabilities
   proportional to ``exp(score / temperature)``: this is how it breaks near-ties (a low
   temperature nearly always takes the best score, a high one spreads its choice over
   near-equals; exact ties are equally likely). If the prompt joins two requests
   ("and", "with", "then") a second goal is the best other surfaced tool scoring at
   least ``second_goal_ratio`` of the first.
4. **Fill arguments** against the goal tool's input schema: identifiers from the
   records earlier results returned (the record whose text best matches the
   prompt, among records from tools whose name mentions the entity); confirmations
   from the chosen record's name; names, titles and search text from
   capitalised or quoted phrases of the prompt (matched to parameters by the words
   around them: "called X", "X playlist", "to X"), descriptions from the text after
   a colon, integers from digits or number words within the schema's bounds. An
   opaque key (letters and digits joined by hyphens, with a digit: ``CAS-D20570823F``)
   is one phrase of its own, preferred for a parameter whose name or description asks
   for a key, code, query or lookup; a quoted word followed by a colon is a key of a
   JSON template the prompt shows (``{"decision": ...}``), never a value.
5. **Carry multi-step tasks through.** A missing identifier triggers a lookup: a
   second search for a tool that finds that entity (for a bare ``id``, the goal's own
   record: the search is for the goal tool's own words plus the lookup words), called
   with the phrase that names it; then the goal is retried. After an error it switches once to the
   next-best tool, then gives up and says so.
6. **Answer** with the last result it obtained.

Server text: by default the host reads tools only, like the Claude API path
(``server_text = "none"``). With ``host.params.server_text: true`` it reads each
tool's integration name and description too (appended to the tool's search
text), like the OpenAI path, and declares ``server_text = "name_and_description"``.

Profiles: ``host.model`` may name one of :data:`PROFILES` (``local-default``,
``local-careful``, ``local-hasty``), a set of the values above; ``host.params`` then
override single values. These are simulated hosts, settings of this one mechanism, not
models and not imitations of any provider's host: comparing two profiles compares two
settings of the mechanism, offline. No ``host.model`` is ``local-default``, and the
records say so (``model_requested``: the profile asked for; ``model_returned`` stays
null, as no model answers).

Measured: wall-clock latency of each turn and token counts in the host's own
word tokenizer (what it read and wrote); cost is None (nothing is priced). A
response longer than the completion cap is cut. Evidence class ``local``.
Tool metadata and prompts are data here: they are split into words, never run.
"""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from statistics import NormalDist
from typing import Any

from prereg.experiments.text import STOPWORDS, words
from prereg.registry.hosts import EvidenceClass
from prereg.registry.units import derive_seed
from prereg.runners.drivers.base import (
    Action,
    CutAtCap,
    Episode,
    Exchange,
    FinalAnswer,
    OfferedTool,
    ToolCall,
    ToolResult,
    Turn,
    Usage,
    render,
)

#: Imperative and question words that start requests; never part of a name.
LEAD_WORDS = frozenset(
    """
add put show make create start give rate take remove delete rename change set find list
search count lower raise empty clear get tell explain can could would will which what who
how when where is are do does did play open bump drop please hey suggest any
""".split()
)
NUMBER_WORDS = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "zero": 0,
}
CONJUNCTIONS = (" and ", " with ", " then ", " also ")
CONNECTORS = frozenset({"and", "of", "the", "&", "a", "on", "in", "de", "la"})
NAME_CUES = {"called": 3.0, "named": 3.0, "titled": 3.0, "to": 2.0, "as": 1.0}
LOOKUP_WORDS = ("find", "search", "list", "show", "get", "browse")
#: Words of a parameter that asks for a lookup key: an opaque key in the prompt fits it.
KEY_WORDS = frozenset({"key", "code", "query", "lookup", "ref", "reference"})


def stem(word: str) -> str:
    """A light plural stemmer (songs -> song, playlists -> playlist, entries -> entry)."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def terms(text: str) -> list[str]:
    return [stem(w) for w in words(text) if w not in STOPWORDS]


@dataclass(frozen=True)
class LocalParams:
    """The host's settings: a profile's values (``host.model``, see :data:`PROFILES`),
    each of which a registration's ``host.params`` may override."""

    search_k: int = 5
    threshold: float = 1.5
    sharpness: float = 1.2
    prompt_sd: float = 1.0
    temperature: float = 0.8
    second_goal_ratio: float = 0.6
    server_text: bool = False
    bm25_k1: float = 1.2
    bm25_b: float = 0.75

    @classmethod
    def from_params(cls, params: Mapping[str, Any], base: LocalParams | None = None) -> LocalParams:
        """``base`` (default: the defaults) with ``params`` overriding its values."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(params) - known)
        if unknown:
            raise ValueError(f"unknown local host params {unknown} (known: {sorted(known)})")
        out = replace(base or cls(), **{k: params[k] for k in params})
        if out.search_k < 1 or out.temperature <= 0 or out.prompt_sd < 0:
            raise ValueError("local host params: search_k >= 1, temperature > 0, prompt_sd >= 0")
        if not out.bm25_k1 >= 0 or not 0 <= out.bm25_b <= 1:
            raise ValueError("local host params: bm25_k1 >= 0, 0 <= bm25_b <= 1")
        if not isinstance(out.server_text, bool):
            raise ValueError("local host params: server_text must be true or false")
        return out


#: The named profiles a registration may give as ``host.model``: simulated hosts, not
#: models. Each is a set of :class:`LocalParams` values; ``host.params`` override them
#: one by one. ``host.model`` absent (null) is ``local-default``'s values, today's host.
#: ``prereg.registry.hosts.DRIVERS["local"].models`` lists the same names (the registry
#: refuses any other at register; tests/test_extension_tables.py checks they agree).
PROFILES: Mapping[str, LocalParams] = {
    # the defaults above
    "local-default": LocalParams(),
    # acts only on a strong match, then picks the best-scoring tool almost every time;
    # BM25 saturates a repeated word sooner (k1) and penalises long descriptions more (b)
    "local-careful": LocalParams(
        threshold=3.0, sharpness=2.0, prompt_sd=0.5, temperature=0.3, bm25_k1=0.9, bm25_b=0.9
    ),
    # acts on a weak match, looks at fewer tools, spreads its choice over near-equals,
    # and ignores description length (b = 0)
    "local-hasty": LocalParams(
        search_k=3, threshold=0.5, sharpness=1.0, temperature=1.6, bm25_b=0.0
    ),
}


class BM25:
    """Okapi BM25 over a small fixed set of documents (the offered tools)."""

    def __init__(self, docs: Sequence[Sequence[str]], k1: float = 1.2, b: float = 0.75) -> None:
        self.docs = [list(d) for d in docs]
        self.k1, self.b = k1, b
        n = len(self.docs)
        self.avgdl = (sum(len(d) for d in self.docs) / n) if n else 0.0
        df: dict[str, int] = {}
        for d in self.docs:
            for t in set(d):
                df[t] = df.get(t, 0) + 1
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}

    def scores(self, query: Sequence[str]) -> list[float]:
        out = []
        for d in self.docs:
            score = 0.0
            norm = self.k1 * (1 - self.b + self.b * len(d) / self.avgdl) if self.avgdl else 1.0
            for t in set(query):
                tf = d.count(t)
                if tf:
                    score += self.idf[t] * tf * (self.k1 + 1) / (tf + norm)
            out.append(score)
        return out


@dataclass(frozen=True)
class Phrase:
    text: str
    before: str  # nearest preceding word that is not a stopword ("" if none)
    context: frozenset[str]  # stemmed words just before and after
    tail: bool = False  # the text after a colon
    code: bool = False  # an opaque key such as CAS-D20570823F (kept whole)


#: An opaque key: letters and digits joined by hyphens, with a digit (CAS-D20570823F).
CODE = r"(?=[A-Za-z0-9-]*\d)[A-Za-z0-9]+(?:-[A-Za-z0-9]+)+"


def _is_code(token: str) -> bool:
    return re.fullmatch(CODE, token) is not None


def _run_end(tokens: Sequence[str], i: int) -> int:
    """The end of the capitalised run starting at ``i`` (an opaque key stands alone)."""
    if _is_code(tokens[i]):
        return i + 1
    j = i + 1
    while j < len(tokens):
        nxt = tokens[j]
        if nxt[:1].isupper() and not _is_code(nxt):
            j += 1
        elif (
            nxt.lower() in CONNECTORS
            and j + 1 < len(tokens)
            and tokens[j + 1][:1].isupper()
            and not _is_code(tokens[j + 1])
        ):
            j += 2
        else:
            break
    return j


def phrases(prompt: str) -> list[Phrase]:
    """Candidate values in a prompt: quoted text (not a JSON template's keys), capitalised
    runs, opaque keys (kept whole), the text after a colon."""
    out: list[Phrase] = []
    head, colon, tail = prompt.partition(":")
    tokens = re.findall(CODE + r"|[\w'&]+|[^\w\s]", head)
    i = 0
    seen: set[str] = set()
    for match in re.finditer(r"\"([^\"]+)\"", head):
        if prompt[match.end() :].lstrip().startswith(":"):
            continue  # a key of a JSON template the request shows ({"decision": ...})
        seen.add(match.group(1).lower())
        out.append(Phrase(match.group(1), "", frozenset()))
    while i < len(tokens):
        tok = tokens[i]
        if tok[:1].isupper() and not (i == 0 and tok.lower() in LEAD_WORDS):
            j = _run_end(tokens, i)
            span = " ".join(tokens[i:j])
            if span.lower() not in STOPWORDS and span.lower() not in seen:
                prev = [t.lower() for t in tokens[:i] if t[:1].isalnum()]
                before = next((w for w in reversed(prev) if w not in STOPWORDS), "")
                around = prev[-2:] + [t.lower() for t in tokens[j : j + 2] if t[:1].isalnum()]
                context = frozenset(stem(w) for w in around)
                out.append(Phrase(span, before, context, code=_is_code(span)))
                seen.add(span.lower())
            i = j
        else:
            i += 1
    if colon and tail.strip():
        out.append(Phrase(tail.strip().rstrip(".!?").strip(), "", frozenset(), tail=True))
    return out


def numbers(prompt: str) -> list[int]:
    out = []
    for w in re.findall(r"[a-z]+|\d+", prompt.lower()):
        if w.isdigit():
            out.append(int(w))
        elif w in NUMBER_WORDS:
            out.append(NUMBER_WORDS[w])
    return out


@dataclass
class Known:
    """A record an earlier result returned, tagged with the entity words of its source."""

    record: dict[str, Any]
    tags: frozenset[str]


def _records(value: Any, tags: frozenset[str], out: list[Known]) -> None:
    if isinstance(value, dict):
        if "id" in value:
            out.append(Known(value, tags))
        for key, inner in value.items():
            if isinstance(inner, (dict, list)):
                _records(inner, frozenset(terms(key)) if key != "items" else tags, out)
    elif isinstance(value, list):
        for inner in value:
            _records(inner, tags, out)


class LocalHost:
    name = "local"
    evidence_class: EvidenceClass = "local"
    sees_solution = False
    loads_all_tools = False

    def __init__(self, params: LocalParams, profile: str | None = None) -> None:
        self.params = params
        #: the profile it was built from (:func:`create`), which its records carry as
        #: ``model_requested``; None for a host built from bare settings
        self.profile = profile
        self.server_text = "name_and_description" if params.server_text else "none"

    async def next_turn(self, episode: Episode, history: Sequence[Exchange]) -> Turn:
        start = time.perf_counter()
        action, surfaced, searched = _Episode(self.params, episode, history).decide()
        seen_text = (
            episode.prompt
            + " "
            + " ".join(ex.result.text for ex in history if ex.result is not None)
        )
        shown = [t for t in episode.tools if surfaced is None or t.name in surfaced]
        if history or surfaced is not None:
            seen_text += " " + " ".join(
                f"{t.name} {t.title} {t.description} {render(t.input_schema)}" for t in shown
            )
            if self.params.server_text:
                servers = dict.fromkeys((t.integration, t.integration_description) for t in shown)
                seen_text += " " + " ".join(f"{n} {d}" for n, d in servers)
        written = (
            action.text
            if isinstance(action, FinalAnswer)
            else render(
                {"name": getattr(action, "name", ""), "arguments": getattr(action, "arguments", {})}
            )
        )
        out_tokens = len(words(written))
        if (
            episode.completion_cap is not None
            and out_tokens > episode.completion_cap
            and isinstance(action, FinalAnswer)
        ):
            action = CutAtCap(" ".join(written.split()[: episode.completion_cap]))
            out_tokens = episode.completion_cap
        usage = Usage(input=len(words(seen_text)), output=out_tokens, reasoning=None, cached=None)
        latency = (time.perf_counter() - start) * 1000.0
        return Turn(
            action=action,
            usage=usage,
            model_returned=None,
            latency_ms=latency,
            cost_usd=None,
            surfaced=surfaced,
            searched=searched,
        )

    async def aclose(self) -> None:
        return None


class _Episode:
    """The host's reasoning for one turn, recomputed from the seeds and the history."""

    def __init__(self, params: LocalParams, episode: Episode, history: Sequence[Exchange]):
        self.p = params
        self.ep = episode
        self.history = history
        self.tools = list(episode.tools)
        self.by_name = {t.name: t for t in self.tools}
        self.docs = [
            terms(
                f"{t.name} {t.title} {t.description}"
                + (f" {t.integration} {t.integration_description}" if params.server_text else "")
            )
            for t in self.tools
        ]
        self.index = BM25(self.docs, k1=params.bm25_k1, b=params.bm25_b)
        self.query = terms(episode.prompt)
        self.phrases = phrases(episode.prompt)
        calls: list[tuple[ToolCall, ToolResult]] = []
        for ex in history:
            if isinstance(ex.turn.action, ToolCall) and ex.result is not None:
                calls.append((ex.turn.action, ex.result))
        self.calls = calls

    # ---- search and decision --------------------------------------------------------------

    def _search(
        self,
        query: Sequence[str],
        exclude: set[str] = frozenset(),  # type: ignore[assignment]
    ) -> list[tuple[OfferedTool, float]]:
        scores = self.index.scores(query)
        order = sorted(range(len(self.tools)), key=lambda i: (-scores[i], i))
        hits = [
            (self.tools[i], scores[i])
            for i in order
            if scores[i] > 0 and self.tools[i].name not in exclude
        ]
        return hits[: self.p.search_k]

    def _plan(self) -> tuple[bool, list[str], list[tuple[OfferedTool, float]]]:
        """(use a tool?, goal tool names, surfaced tools with scores); same on every turn."""
        surfaced = self._search(self.query)
        best = surfaced[0][1] if surfaced else 0.0
        z_prompt = NormalDist().inv_cdf(
            min(max(random.Random(derive_seed(self.ep.prompt_seed, "z")).random(), 1e-9), 1 - 1e-9)
        )
        logit = self.p.sharpness * (best - self.p.threshold) + self.p.prompt_sd * z_prompt
        p_tool = 1.0 / (1.0 + math.exp(-logit))
        rng = random.Random(derive_seed(self.ep.seed, "decide"))
        use = bool(surfaced) and rng.random() < p_tool
        if not use:
            return False, [], surfaced
        weights = [math.exp((s - best) / self.p.temperature) for _, s in surfaced]
        pick = rng.random() * sum(weights)
        goal = surfaced[-1][0]
        for (tool, _), w in zip(surfaced, weights, strict=True):
            pick -= w
            if pick <= 0:
                goal = tool
                break
        goals = [goal.name]
        text = f" {self.ep.prompt.lower()} "
        if any(c in text for c in CONJUNCTIONS):
            goal_score = dict((t.name, s) for t, s in surfaced)[goal.name]
            others = [
                (t, s)
                for t, s in surfaced
                if t.name != goal.name and s >= self.p.second_goal_ratio * goal_score
            ]
            if others:
                goals.append(others[0][0].name)
        return True, goals, surfaced

    def decide(self) -> tuple[Action, tuple[str, ...] | None, bool | None]:
        use, goals, surfaced = self._plan()
        names = tuple(t.name for t, _ in surfaced)
        first = not self.history
        if not use:
            return (
                FinalAnswer("I can answer this directly without using a tool."),
                names if first else None,
                True if first else None,
            )
        action, lookup_surfaced = self._act(goals, [t.name for t, _ in surfaced])
        if first:
            return action, names + tuple(n for n in lookup_surfaced or () if n not in names), True
        return action, lookup_surfaced, (True if lookup_surfaced is not None else None)

    # ---- acting ----------------------------------------------------------------------------

    def _known(self) -> list[Known]:
        out: list[Known] = []
        for call, result in self.calls:
            if not result.is_error:
                _records(result.content, frozenset(terms(call.name)), out)
        return out

    def _act(self, goals: list[str], surfaced: list[str]) -> tuple[Action, tuple[str, ...] | None]:
        done = {c.name for c, r in self.calls if not r.is_error}
        failed = [c.name for c, r in self.calls if r.is_error]
        if self.calls and self.calls[-1][1].is_error:
            last_call = self.calls[-1][0].name
            if last_call in goals:
                # switch once to the next-best surfaced tool, then give up
                alternatives = [n for n in surfaced if n not in goals and n not in failed]
                if len(failed) >= 2 or not alternatives:
                    return FinalAnswer(f"I could not complete that: {self.calls[-1][1].text}"), None
                goals = [alternatives[0] if g == last_call else g for g in goals]
            elif failed.count(last_call) >= 2:
                return FinalAnswer(
                    f"I could not find what I needed: {self.calls[-1][1].text}"
                ), None
        if len(failed) >= 3:
            return FinalAnswer("I could not complete that."), None
        pending = [g for g in goals if g not in done]
        if not pending:
            last_ok = next((r for _, r in reversed(self.calls) if not r.is_error), None)
            body = last_ok.text if last_ok is not None else ""
            return FinalAnswer(f"Here is what I found: {body}"), None
        goal = self.by_name[pending[0]]
        args, missing = self._fill(goal)
        if missing:
            lookup = self._lookup(missing, goal)
            if lookup is not None:
                return lookup
            return FinalAnswer(f"I could not find the {missing} I needed."), None
        return ToolCall(goal.name, args), None

    def _used_values(self) -> set[str]:
        out: set[str] = set()
        for call, _ in self.calls:
            if isinstance(call.arguments, dict):
                out.update(str(v).lower() for v in call.arguments.values() if isinstance(v, str))
        return out

    def _fill(self, tool: OfferedTool) -> tuple[dict[str, Any], str | None]:
        """Arguments for ``tool``; the entity of a missing identifier, if any."""
        schema = tool.input_schema
        props: Mapping[str, Any] = schema.get("properties") or {}
        required = list(schema.get("required") or [])
        order = required + [p for p in props if p not in required]
        args: dict[str, Any] = {}
        chosen: dict[str, Any] | None = None
        known = self._known()
        used = self._used_values()
        taken: set[str] = set()
        string_params = []
        for name in order:
            spec = props.get(name) or {}
            if _is_id(name):
                entity = name[:-3] if name.endswith("_id") else name
                record = self._best_record(entity, name, known)
                if record is None:
                    if name in required:
                        return args, entity
                    continue
                args[name] = record["value"]
                chosen = chosen or record["record"]
            elif "confirm" in name:
                continue
            elif "enum" not in spec and spec.get("type") == "string":
                string_params.append(name)
            else:
                self._fill_value(name, spec, args)
        for name, text in self._assign_strings(tool, string_params, used, taken).items():
            args[name] = text
        if chosen is not None:
            args.update(_confirmations(order, chosen))
        return args, None

    def _fill_value(self, name: str, spec: Mapping[str, Any], args: dict[str, Any]) -> None:
        """An enum option the prompt names, or a number from the prompt within bounds."""
        kind = spec.get("type")
        if "enum" in spec:
            for option in spec["enum"]:
                if str(option).lower() in self.ep.prompt.lower():
                    args[name] = option
                    break
        elif kind == "integer" or kind == "number":
            number = self._number(spec)
            if number is not None:
                args[name] = number

    def _assign_strings(
        self, tool: OfferedTool, names: list[str], used: set[str], taken: set[str]
    ) -> dict[str, str]:
        props: Mapping[str, Any] = tool.input_schema.get("properties") or {}
        scored: list[tuple[float, int, str, Phrase]] = []
        for name in names:
            pwords = set(terms(name + " " + str((props.get(name) or {}).get("description", ""))))
            is_text = bool(pwords & {"description", "about"})
            is_name = bool(pwords & {"name", "title"}) and not (pwords & {"song", "track", "album"})
            for k, ph in enumerate(self.phrases):
                if ph.tail != is_text:
                    continue
                score = 5.0 if ph.tail else 0.0
                if is_name:
                    score += NAME_CUES.get(ph.before, 0.0)
                if ph.code and pwords & KEY_WORDS:
                    score += 3.0
                score += 2.0 * len(pwords & ph.context)
                if ph.text.lower() not in used:
                    score += 1.0
                scored.append((score, -k, name, ph))
        scored.sort(key=lambda s: (-s[0], -s[1]))
        out: dict[str, str] = {}
        for _, _, name, ph in scored:
            if name in out or ph.text in taken:
                continue
            out[name] = ph.text
            taken.add(ph.text)
        required = set(tool.input_schema.get("required") or [])
        for name in names:
            if name not in out and name in required:
                fallback = self._fallback_query(tool)
                if fallback:
                    out[name] = fallback
        return out

    def _fallback_query(self, tool: OfferedTool) -> str:
        """Content words of the prompt that are not the tools' own vocabulary."""
        vocab = {w for doc in self.docs for w in doc}
        kept = [
            w
            for w in words(self.ep.prompt)
            if w not in STOPWORDS and w not in LEAD_WORDS and stem(w) not in vocab
        ]
        return " ".join(kept)

    def _number(self, spec: Mapping[str, Any]) -> int | None:
        low = spec.get("minimum", -math.inf)
        high = spec.get("maximum", math.inf)
        for n in numbers(self.ep.prompt):
            if low <= n <= high:
                return n
        return None

    def _best_record(self, entity: str, param: str, known: list[Known]) -> dict[str, Any] | None:
        target = stem(entity.split("_")[-1])
        prompt_terms = set(self.query)
        best: tuple[int, int, dict[str, Any], Any] | None = None
        for pos, item in enumerate(known):
            rec = item.record
            if param in rec and rec[param] is not None:
                value = rec[param]
            elif target in item.tags or not any(target in k.tags for k in known):
                value = rec.get("id")
            else:
                continue
            text = " ".join(
                str(v)
                for k, v in rec.items()
                if isinstance(v, str) and k != "id" and not k.endswith("_id")
            )
            overlap = len(prompt_terms & set(terms(text)))
            if overlap == 0:
                continue
            if best is None or overlap > best[0]:
                best = (overlap, -pos, rec, value)
        if best is None:
            return None
        return {"record": best[2], "value": best[3]}

    def _lookup(
        self, entity: str, goal: OfferedTool
    ) -> tuple[Action, tuple[str, ...] | None] | None:
        """A call that finds the entity, from a second search."""
        tried = [c.name for c, _ in self.calls]
        target = stem(entity.split("_")[-1])
        if any(
            c.name in tried and not r.is_error for c, r in self.calls if target in terms(c.name)
        ) and not [p for p in self.phrases if not p.tail]:
            # the entity was listed and the prompt names nothing to pick: show the list
            last = next(r for _, r in reversed(self.calls) if not r.is_error)
            return FinalAnswer(f"Here is what I found: {last.text}"), None
        query = [target, *LOOKUP_WORDS]
        if entity == "id":  # the goal's own record: search like the goal, for finding
            query = [*self.docs[self.tools.index(goal)], *LOOKUP_WORDS]
        hits = self._search(query, exclude={goal.name})
        # a tool that never mentions the entity is a poor way to find it
        hits = [h for h in hits if target in self.docs[self.tools.index(h[0])]] or hits
        surfaced = tuple(t.name for t, _ in hits)
        for tool, _ in hits:
            required = tool.input_schema.get("required") or []
            if any(_is_id(r) for r in required) or tried.count(tool.name) >= 1:
                continue
            args, missing = self._fill_lookup(tool, entity)
            if missing:
                continue
            return ToolCall(tool.name, args), surfaced
        return None

    def _fill_lookup(self, tool: OfferedTool, entity: str) -> tuple[dict[str, Any], bool]:
        props: Mapping[str, Any] = tool.input_schema.get("properties") or {}
        required = set(tool.input_schema.get("required") or [])
        target = stem(entity.split("_")[-1])
        candidates = [ph for ph in self.phrases if not ph.tail]
        used = self._used_values()
        args: dict[str, Any] = {}
        for name, spec in props.items():
            if (spec or {}).get("type") != "string" or _is_id(name):
                continue
            keyed = bool(set(terms(f"{name} {(spec or {}).get('description', '')}")) & KEY_WORDS)
            ranked = sorted(
                enumerate(candidates),
                key=lambda kp: (
                    -(
                        2 * (target in kp[1].context)
                        + (kp[1].text.lower() not in used)
                        + 3 * (keyed and kp[1].code)
                    ),
                    kp[0],
                ),
            )
            if ranked:
                args[name] = ranked[0][1].text
            elif name in required:
                fallback = self._fallback_query(tool)
                if not fallback:
                    return args, True
                args[name] = fallback
            break
        missing = any(r not in args for r in required)
        return args, missing


def _confirmations(order: Sequence[str], chosen: Mapping[str, Any]) -> dict[str, Any]:
    """Each confirmation parameter gets the chosen record's name (else its title)."""
    out: dict[str, Any] = {}
    for name in order:
        if "confirm" in name:
            for key in ("name", "title"):
                if isinstance(chosen.get(key), str):
                    out[name] = chosen[key]
                    break
    return out


def _is_id(name: str) -> bool:
    return name == "id" or name.endswith("_id")


#: The profile a registration without ``host.model`` runs: what its records name as
#: ``model_requested`` (the README: the records carry the profile).
DEFAULT_PROFILE = "local-default"


def profile(model: str | None) -> LocalParams:
    """The values of profile ``model`` (None: the defaults); ValueError for an unknown name."""
    if model is None:
        return PROFILES[DEFAULT_PROFILE]
    if model not in PROFILES:
        raise ValueError(f"the local host has no profile '{model}' (known: {', '.join(PROFILES)})")
    return PROFILES[model]


def create(
    model: str | None = None, params: Mapping[str, Any] | None = None, **options: Any
) -> LocalHost:
    """The local host with profile ``model`` (:data:`PROFILES`; None: the defaults) and
    ``params`` overriding its values (see LocalParams); it takes no options."""
    if options:
        raise TypeError(f"the local host takes no options (got {sorted(options)})")
    base = profile(model)
    return LocalHost(LocalParams.from_params(params or {}, base=base), model or DEFAULT_PROFILE)
