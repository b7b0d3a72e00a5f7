"""The lab assistant: a question in plain words → scope + intent → a structured
result shown directly, and a short lead (never the list retyped by a model).

Each turn yields typed events: :class:`Status`, :class:`Meta` (scope and
intent), :class:`Delta` (pieces of the lead) and :class:`Done` (the result).
Rule-only questions make no model call: their lead is written by a template.
The model is asked only when the rules cannot tell what is meant — first with
the current message alone, then with the history (within the token-aware
memory budget) — and a low-confidence answer becomes a clarifying question.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, Field

from furnace.assistant.intent import (
    CLARIFY_BELOW,
    CLASSIFY_SCHEMA,
    STRONG,
    Classification,
    GuessSource,
    IntentGuess,
    classify,
)
from furnace.assistant.leads import template_lead
from furnace.assistant.queries import SHAPES, examples, run_query
from furnace.assistant.results import AssistData, GapOrder, Query, StructuredResult
from furnace.assistant.scope import (
    Catalogue,
    Inferred,
    Scope,
    infer_scope,
    match_names,
    parse_command,
    without_ids,
)
from furnace.domain.errors import LLMError
from furnace.domain.intents import INTENTS, cost_group, count_subject
from furnace.domain.text import detect_language
from furnace.domain.times import utc_now
from furnace.llm.context import build_context
from furnace.llm.seam import LLM, LLMRequest, Message, TaskKind
from furnace.llm.structured import parse_reply

MIN_CONFIDENCE = CLARIFY_BELOW  # the model's answer is held to the rules' threshold
MAX_QUESTION_CHARS = 2_000
LINEAGE = ("ancestors", "descendants", "common_ancestors")
LEAD_MAX_TOKENS = 80
LEAD_SYSTEM = (
    "You are furnace's lab assistant. The full result is already on the user's screen as a table. "
    "Do not repeat, list or enumerate its rows. Write one or two sentences (at most 50 words) that "
    "introduce it: what it shows and the one thing worth noticing."
)
CLASSIFY_SYSTEM = (
    "Classify a researcher's question about furnace's data. Answer JSON: intent (one of "
    + ", ".join(INTENTS)
    + ", or null), persona and experiment (ids from the catalogue, or null), days (a time range, or null), "
    "confidence in [0,1]. Use only the names in the catalogue; never invent one."
)


class Status(BaseModel):
    type: Literal["status"] = "status"
    text: str


class Meta(BaseModel):
    type: Literal["meta"] = "meta"
    scope: Scope
    scope_label: str
    locked: bool
    intent: str | None
    intent_source: str
    confidence: float = 1.0


class Delta(BaseModel):
    type: Literal["delta"] = "delta"
    text: str


class Done(BaseModel):
    type: Literal["done"] = "done"
    lead: str
    result: StructuredResult | None = None
    clarify: bool = False
    scope_label: str

    @property
    def needs_clarification(self) -> bool:
        """The answer is a question back to the user (nothing was queried)."""
        return self.clarify


AnswerEvent = Status | Meta | Delta | Done


class Turn(BaseModel):
    question: str
    answer: str


class AssistantState(BaseModel):
    """What persists between turns: only the locked scope, and the history."""

    session_id: str = "default"
    locked: Scope | None = None
    history: list[Turn] = Field(default_factory=list)


def _cap(text: str, max_tokens: int, count: Callable[[str], int]) -> str:
    """Cut ``text`` to ``max_tokens`` even if a provider ignored max_tokens."""
    if count(text) <= max_tokens:
        return text
    pieces = re.findall(r"\S+\s*", text)
    while pieces and count("".join(pieces) + "…") > max_tokens:
        pieces.pop()
    return "".join(pieces).rstrip() + "…"


_SMALLEST_GAP = re.compile(
    r"\b(smallest|lowest|narrowest|least|tiniest)\b[^.?!;]*\bgaps?\b|\bleast over-?fit|差距?最小|差值最小|最不过拟合",
    re.I,
)
_LARGEST_GAP = re.compile(
    r"\b(largest|biggest|widest|highest|most|greatest)\b[^.?!;]*\bgaps?\b"
    r"|\b(by|sorted by|order(ed)? by)\b[^.?!;]*\bgaps?\b|\bover-?fit|差距?最大|差值最大|过拟合|按[^。？！]*差",
    re.I,
)


def gap_order(words: str) -> GapOrder | None:
    """Whether the question asks for rows by their train-test gap ("the largest train-test gap", "which agents
    overfit most", "过拟合"), and which end first; None for the intent's own order ("generalises best" is the
    best by fitness, shown with its test figures)."""
    if _SMALLEST_GAP.search(words):
        return "smallest_gap"
    if _LARGEST_GAP.search(words):
        return "largest_gap"
    return None


_CHAMPION = re.compile(r"\b(champion|winner|winning agent|best agent)\b|冠军|最佳智能体|最好的智能体", re.I)
_ABOUT_ONE_AGENT = ("ancestors", "descendants", "judge_feedback")  # intents about one agent's record


class Assistant:
    """Answers questions over furnace's own data through :class:`AssistData`."""

    def __init__(
        self,
        data: AssistData,
        llm: LLM | None = None,
        *,
        model_lead: bool = False,
        now: Callable[[], datetime] = utc_now,
        context_limit: int = 32_000,
        count_tokens: Callable[[str], int] | None = None,
        limit: int = 50,
    ) -> None:
        self.data = data
        self.llm = llm
        self.model_lead = model_lead
        self.now = now
        self.context_limit = context_limit
        self.count = count_tokens or (lambda text: max(1, len(text) // 4))
        self.limit = limit

    # --- one turn ---------------------------------------------------------

    def ask(self, question: str, state: AssistantState) -> Iterator[AnswerEvent]:
        """Answer one question; updates ``state`` (locked scope, history)."""
        question = question.strip()
        zh = detect_language(question) == "zh"
        yield Status(text="正在理解问题…" if zh else "Reading the question…")
        refusal = self._refuse(question, zh)
        if refusal:
            yield from self._finish(state, question[:200], refusal, None, state.locked or Scope(), clarify=True)
            return
        catalogue = self.data.catalogue()
        command = parse_command(question)
        if command is not None:
            yield from self._command(command, question, state, catalogue, zh)
            return
        yield from self._answer(question, state, catalogue, zh)

    def _answer(
        self, question: str, state: AssistantState, catalogue: Catalogue, zh: bool, *, prefix: str = ""
    ) -> Iterator[AnswerEvent]:
        inferred = infer_scope(question, catalogue, self.now())
        words = without_ids(question, catalogue)  # what is asked, without the records it is asked about
        guess = self._reroute(question, words, classify(question, catalogue), inferred, catalogue)
        if guess.needs_clarification or inferred.unresolved:
            guess, inferred = self._ask_model(question, state, catalogue, guess, inferred)
        clarify = self._clarification(guess, inferred, catalogue, zh, words) or self._lock_conflict(state, inferred, zh)
        locked = state.locked or Scope()
        scope = locked.overlaid(inferred.scope)  # this turn only; the lock itself is unchanged
        subjects = self._subjects(question, inferred, catalogue)
        if guess.intent == "compare":  # the subjects are compared, not filtered on
            scope = locked.overlaid(inferred.scope.model_copy(update={"persona": None, "agent": None}))
        asks_champion = guess.intent in _ABOUT_ONE_AGENT and _CHAMPION.search(words)
        if not clarify and asks_champion and not (inferred.agents or scope.persona or scope.agent):
            # "the champion's lineage": the champion of the experiment asked about, else of the latest
            found = self._champion(scope.experiment or catalogue.latest_experiment)
            if found is None:
                clarify = (
                    "还没有实验选出冠军；请给出一个智能体（agt-…）。"
                    if zh
                    else "No experiment has a champion yet; which agent (agt-…) do you mean?"
                )
            else:
                experiment, champion = found
                inferred.agents = [champion]
                if guess.intent == "judge_feedback":  # its notes in the experiment it won
                    scope = scope.model_copy(update={"experiment": experiment})
                prefix += (
                    f"{experiment} 的冠军是 {champion}。" if zh else f"The champion of {experiment} is {champion}. "
                )
        if not clarify and guess.intent is not None:
            clarify = self._missing_subject(guess.intent, scope, inferred, zh, subjects)
        if clarify:
            yield from self._finish(state, question, prefix + clarify, None, locked, clarify=True)
            return
        assert guess.intent is not None
        yield Meta(
            scope=scope,
            scope_label=scope.label(),
            locked=state.locked is not None,
            intent=guess.intent,
            intent_source=guess.source,
            confidence=guess.confidence,
        )
        yield Status(text="正在查询…" if zh else "Querying…")
        named = [e for e in catalogue.experiments if e.casefold() in question.casefold()]
        query = Query(
            scope=scope,
            agents=tuple(inferred.agents),
            versions=tuple(inferred.versions),
            experiments=tuple(named) if len(named) > 1 else (),
            subjects=tuple(subjects) if guess.intent == "compare" else (),
            counting=count_subject(words),
            language=inferred.language,
            group=cost_group(words),
            limit=self.limit,
            order=gap_order(words),
        )
        result = run_query(self.data, guess.intent, query, zh=zh)
        lead = prefix + self._lead(question, result, zh, used_model=guess.source != "rules")
        yield from self._finish(state, question, lead, result, scope, applied=result.applied)

    def _champion(self, experiment: str | None) -> tuple[str, str] | None:
        """``(experiment, its champion)``: the agent its report names best (held out), else its best-scored
        bred agent; None without an experiment or an agent to name."""
        if experiment is None:
            return None
        scope = Scope(experiment=experiment)
        rows = self.data.experiments(Query(scope=scope, limit=1))
        champion = rows[0].get("champion") if rows else None
        if not champion:
            best = self.data.top_agents(Query(scope=scope, limit=1))
            champion = best[0]["agent_id"] if best else None
        return (experiment, champion) if champion else None

    @staticmethod
    def _subjects(question: str, inferred: Inferred, catalogue: Catalogue) -> list[str]:
        """Agents and personas named in the question, in the order written (what a comparison compares)."""
        low = question.casefold()
        found = [(low.find(a), a) for a in inferred.agents]
        for pid in inferred.personas:
            labels = [x for x in (pid.casefold(), catalogue.personas.get(pid, "").casefold()) if x]
            found.append((min((low.find(x) for x in labels if x in low), default=len(low)), pid))
        return [s for _, s in sorted(found)]

    def _reroute(
        self, question: str, words: str, guess: IntentGuess, inferred: Inferred, catalogue: Catalogue
    ) -> IntentGuess:
        """Let the subjects named settle what the words alone cannot: two experiments compared are an
        experiment comparison, two agents or personas "compared" or "told apart" a side-by-side (``words``:
        the question without the ids it names)."""
        named = [e for e in catalogue.experiments if e.casefold() in question.casefold()]
        subjects = len(inferred.agents) + len(inferred.personas)
        sure = guess.model_copy(update={"confidence": max(guess.confidence, STRONG), "source": "rules"})
        if len(named) > 1 and guess.intent in (None, "experiments", "compare"):  # "exp-a vs exp-b"
            return sure.model_copy(update={"intent": "experiment_compare"})
        if guess.intent == "compare" and subjects < 2 and len(inferred.operators) > 1:  # crossover vs mutation
            return sure.model_copy(update={"intent": "operators"})
        if guess.intent == "compare" and subjects < 2 and len(named) == 1:
            return sure.model_copy(update={"intent": "experiment_compare"})
        if guess.intent == "persona_diff" and subjects >= 2 and not inferred.versions:  # "A 和 B 有什么区别"
            return sure.model_copy(update={"intent": "compare"})
        asks_agents = re.search(r"\bagents?\b|智能体", words)
        if guess.intent == "operators" and asks_agents and inferred.operators:
            return guess.model_copy(update={"intent": "agents"})  # "agents made by crossover"
        return guess

    @staticmethod
    def _refuse(question: str, zh: bool) -> str | None:
        """A clear answer for a question that can't be read at all (empty, far too long)."""
        if not question:
            return (
                "请输入一个问题，例如：" + "；".join(examples(zh))
                if zh
                else "Ask a question, for example: " + "; ".join(examples(zh))
            )
        if len(question) > MAX_QUESTION_CHARS:
            return (
                f"这个问题有 {len(question):,} 个字符，太长了；请在 {MAX_QUESTION_CHARS:,} 字以内提问。"
                if zh
                else f"That question is {len(question):,} characters long; "
                f"please ask in under {MAX_QUESTION_CHARS:,} characters."
            )
        return None

    def _missing_subject(
        self, intent: str, scope: Scope, inferred: Inferred, zh: bool, subjects: list[str]
    ) -> str | None:
        """Lineage, diff and comparison questions need something to start from; unknown agents are named."""
        unknown = [a for a in inferred.agents if not self.data.known_agent(a)]
        if unknown:
            return f"我找不到智能体 {unknown[0]}。" if zh else f"I can't find an agent called {unknown[0]!r}."
        if intent == "compare" and len(subjects) < 2:
            return (
                "请给出要比较的两个智能体（agt-…）或人设，例如“帮我比较 agt-… 和 tea-master”。"
                if zh
                else "Which two agents (agt-…) or personas should I compare? "
                "For example: 'compare agt-… and tea-master'."
            )
        nodes = len(inferred.agents) + (1 if scope.persona or scope.agent else 0)
        if intent == "common_ancestors" and nodes < 2:
            return (
                "请给出两个智能体（agt-…）或人设，我来找它们的共同祖先。"
                if zh
                else "Name two agents (agt-…) or personas and I'll find their common ancestors."
            )
        if intent in ("ancestors", "descendants") and nodes < 1:
            return (
                "请说明从哪个智能体（agt-…）或人设开始。"
                if zh
                else "Which agent (agt-…) or persona should I start from?"
            )
        if intent == "persona_diff" and not scope.persona:
            return "请说明要比较哪个人设的版本。" if zh else "Which persona's versions should I compare?"
        return None

    @staticmethod
    def _lock_conflict(state: AssistantState, inferred: Inferred, zh: bool) -> str | None:
        """A question naming another persona/experiment than the lock: ask before switching."""
        if state.locked is None:
            return None
        for field in ("persona", "experiment", "operator"):
            held, asked = getattr(state.locked, field), getattr(inferred.scope, field)
            if held and asked and held != asked:
                return (
                    f"范围已锁定为 {field}={held}，而你问的是 {asked}。要切换吗？说“只看 {asked}”切换，或“清除范围”。"
                    if zh
                    else f"The scope is locked to {field}={held}, but you asked about {asked}. "
                    f"Say 'only look at {asked}' to switch, or 'clear scope'."
                )
        return None

    def _finish(
        self,
        state: AssistantState,
        question: str,
        lead: str,
        result: StructuredResult | None,
        scope: Scope,
        *,
        clarify: bool = False,
        applied: str | None = None,
    ) -> Iterator[AnswerEvent]:
        for piece in re.findall(r"\S+\s*", lead):
            yield Delta(text=piece)
        state.history.append(Turn(question=question, answer=lead))
        yield Done(lead=lead, result=result, clarify=clarify, scope_label=applied or scope.label())

    # --- scope commands -----------------------------------------------------

    def _command(
        self, command: tuple[str, str], question: str, state: AssistantState, catalogue: Catalogue, zh: bool
    ) -> Iterator[AnswerEvent]:
        kind, target = command
        if kind == "clear":
            state.locked = None
            text = "已清除范围：之后的问题覆盖全部数据。" if zh else "Scope cleared: questions now cover everything."
            yield from self._finish(state, question, text, None, Scope())
            return
        inferred = infer_scope(target, catalogue, self.now())
        if len(inferred.agents) == 1:  # "lock to agt-…"
            agent = inferred.agents[0]
            if not self.data.known_agent(agent):
                text = f"我找不到智能体 {agent}。" if zh else f"I can't find an agent called {agent!r}."
                yield from self._finish(state, question, text, None, state.locked or Scope(), clarify=True)
                return
            inferred = inferred.model_copy(update={"scope": inferred.scope.model_copy(update={"agent": agent})})
        if inferred.scope.is_empty():  # "only the coach" without the word persona
            inferred = self._bare_name(target, catalogue)
        clarify = self._clarification(
            IntentGuess(intent="personas", confidence=1, source="rules"), inferred, catalogue, zh
        )
        if clarify or inferred.scope.is_empty():
            text = clarify or (f"我没能从“{target}”读出范围。" if zh else f"I could not read a scope from {target!r}.")
            yield from self._finish(state, question, text, None, state.locked or Scope(), clarify=True)
            return
        state.locked = inferred.scope
        yield Meta(
            scope=inferred.scope, scope_label=inferred.scope.label(), locked=True, intent=None, intent_source="rules"
        )
        text = f"范围已锁定：{inferred.scope.label()}。" if zh else f"Scope locked: {inferred.scope.label()}."
        asked = classify(self._residue(target, inferred, catalogue), catalogue)
        if not asked.needs_clarification and asked.intent not in ("personas", "experiments", "agents", "operators"):
            yield from self._answer(target, state, catalogue, zh, prefix=text + " ")  # "只看 tea-master 的版本"
            return
        yield from self._finish(state, question, text, None, inferred.scope)

    @staticmethod
    def _residue(target: str, inferred: Inferred, catalogue: Catalogue) -> str:
        """A lock target without the names it locks to: what is left may be a question ("的版本")."""
        rest = target
        scope = inferred.scope
        names = [*inferred.agents, *inferred.operators]
        for pid in filter(None, (scope.persona,)):
            names += [pid, catalogue.personas.get(pid, "")]
        for eid in filter(None, (scope.experiment,)):
            names += [eid, catalogue.experiments.get(eid, "")]
        for name in sorted(filter(None, names), key=len, reverse=True):
            rest = re.sub(re.escape(name), " ", rest, flags=re.I)
        return rest

    @staticmethod
    def _bare_name(target: str, catalogue: Catalogue) -> Inferred:
        words = [w for w in re.split(r"[\s,，]+", target) if w and w.casefold() not in {"the", "only"}]
        for word in words:
            for attr, names in (("persona", catalogue.personas), ("experiment", catalogue.experiments)):
                hits = match_names(word, names)
                if len(hits) == 1:
                    return Inferred(scope=Scope.model_validate({attr: hits[0]}))
        return Inferred(unresolved=[f"name {target}"])

    # --- the model, only when rules cannot tell -----------------------------

    def _ask_model(
        self, question: str, state: AssistantState, catalogue: Catalogue, guess: IntentGuess, inferred: Inferred
    ) -> tuple[IntentGuess, Inferred]:
        if self.llm is None:
            return guess, inferred
        attempts: list[tuple[GuessSource, list[Turn]]] = [("model", [])]
        if state.history:
            attempts.append(("model+history", state.history))
        for source, history in attempts:
            parsed = self._classify_call(question, catalogue, history)
            if parsed is None or parsed.confidence < MIN_CONFIDENCE:
                continue
            intent = parsed.intent or guess.intent
            if intent is None:
                continue
            fields = {
                k: v
                for k, v in (("persona", parsed.persona), ("experiment", parsed.experiment))
                if v and v in (catalogue.personas if k == "persona" else catalogue.experiments)
            }
            since = self.now() - timedelta(days=parsed.days) if parsed.days else None
            model_scope = Scope(since=since, persona=fields.get("persona"), experiment=fields.get("experiment"))
            unresolved = [u for u in inferred.unresolved if u.split(" ")[0] not in fields]
            return (
                IntentGuess(intent=intent, confidence=parsed.confidence, source=source),
                inferred.model_copy(update={"scope": inferred.scope.overlaid(model_scope), "unresolved": unresolved}),
            )
        return guess, inferred

    def _classify_call(self, question: str, catalogue: Catalogue, history: list[Turn]) -> Classification | None:
        assert self.llm is not None
        system = CLASSIFY_SYSTEM + "\nCatalogue: " + str(catalogue.model_dump())
        turns = [
            m
            for t in history
            for m in (Message(role="user", content=t.question), Message(role="assistant", content=t.answer))
        ]
        context = build_context(
            system_prompt=system,
            user_message=question,
            history=turns,
            context_limit=self.context_limit,
            count=self.count,
            llm=self.llm,
        )
        request = LLMRequest(
            task=TaskKind.ASSIST,
            messages=tuple(context.messages),
            temperature=0.0,
            seed=0,
            max_tokens=120,
            json_schema=CLASSIFY_SCHEMA,
            inputs={
                "mode": "classify",
                "question": question,
                "catalogue": catalogue.model_dump(),
                "history": [t.question for t in history],
            },
        )
        try:  # the one structured-output path: JSON found in any reply shape, validated into the model
            return parse_reply(self.llm.complete(request), Classification, task="assist classify")
        except LLMError:  # a failed call or a reply outside the schema is no answer: the rules' guess stands
            return None

    def _lead(self, question: str, result: StructuredResult, zh: bool, *, used_model: bool) -> str:
        if self.llm is None or not (self.model_lead or used_model):
            return template_lead(result, zh)
        request = LLMRequest(
            task=TaskKind.ASSIST,
            messages=(
                Message(role="system", content=LEAD_SYSTEM),
                Message(role="user", content=f"Question: {question}\nResult summary: {result.summary()}"),
            ),
            temperature=0.2,
            seed=0,
            max_tokens=LEAD_MAX_TOKENS,
            inputs={"mode": "lead", "question": question, "result": result.summary(), "language": "zh" if zh else "en"},
        )
        try:
            text = self.llm.complete(request).text.strip()
        except LLMError:
            return template_lead(result, zh)
        return _cap(text, LEAD_MAX_TOKENS, self.count) or template_lead(result, zh)

    # --- clarifying questions ------------------------------------------------

    @staticmethod
    def _clarification(
        guess: IntentGuess, inferred: Inferred, catalogue: Catalogue, zh: bool, question: str = ""
    ) -> str | None:
        if inferred.ambiguous:
            word, hits = next(iter(inferred.ambiguous.items()))
            options = ", ".join(hits[:5])
            return (
                f"“{word}”可能指多个记录：{options}。你指的是哪一个？"
                if zh
                else f"{word!r} could mean several records: {options}. Which one do you mean?"
            )
        if inferred.unresolved:
            what, _, name = inferred.unresolved[0].partition(" ")
            known = list(catalogue.personas if what == "persona" else catalogue.experiments)[:5]
            hint = ", ".join(known) or "none yet"
            return (
                f"我找不到名为“{name}”的{'人设' if what == 'persona' else '实验'}。已有：{hint}。你指的是哪个？"
                if zh
                else f"I can't find {'an' if what[0] in 'aeiou' else 'a'} {what} called {name!r}. Known: {hint}. "
                "Which one do you mean?"
            )
        if guess.intent is None and re.search(r"\bhow many\b|\bnumber of\b|\bcount\b|多少|几个", question, re.I):
            return (
                "你想数什么？我能统计智能体、人设和实验的数量，例如“一共有多少个智能体？”"
                if zh
                else "How many of what? I can count agents, personas and experiments, "
                "for example: 'how many agents are there in total?'"
            )
        if guess.intent is not None and guess.needs_clarification:  # rules (and model) unsure: ask back
            choices = list(dict.fromkeys([guess.intent, *guess.alternatives]))[:3]
            if zh:
                readings = "，还是".join(SHAPES[o].title_zh for o in choices)
                samples = "；".join(f"“{SHAPES[o].example_zh}”" for o in choices if SHAPES[o].example_zh)
                return f"我不确定你想看的是{readings}？请说得具体一些，例如：{samples}"
            readings = " or ".join(SHAPES[o].title_en.lower() for o in choices)
            samples = "; ".join(f"{SHAPES[o].example_en!r}" for o in choices if SHAPES[o].example_en)
            return f"I'm not sure whether you mean {readings}. Could you say which? For example: {samples}"
        if guess.intent is None:
            asks = examples(zh)
            return (
                "我不确定你想看什么。我能回答关于智能体、算子、谱系、人设版本、失败、评委反馈、实验、内容、群聊和花费的问题，"
                "也能计数、并排比较、按语言或算子筛选，例如：" + "；".join(f"“{q}”" for q in asks)
                if zh
                else "I'm not sure what you'd like to see. I answer questions about agents, operators, lineage, "
                "persona versions, failures, judge feedback, experiments, content, arena runs and costs, and I count, "
                "compare side by side and filter by language or operator, for example: "
                + "; ".join(f"{q!r}" for q in asks)
            )
        return None
