"""The elixir: a persona as a structured, versioned, immutable skill pack.

An :class:`Elixir` is a frozen value. Editing means building a new value
(``elixir.model_copy(update=...)`` or :func:`edit`) which the store saves
as ``version + 1``. ``content_hash`` covers the content fields only
(everything but ``id``, ``version``, ``created_at`` and ``deleted_at``),
over the canonical JSON of :mod:`furnace.domain.canonical`.

Use :func:`parse_elixir` on untrusted input: it turns every validation
problem into one :class:`~furnace.domain.errors.InputError` whose message names
the field, e.g. ``tone.humor must be between 0 and 1, got 1.7``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from datetime import datetime
from functools import cached_property
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidationInfo,
    computed_field,
    field_validator,
    model_serializer,
    model_validator,
)

from furnace.domain.canonical import canonical_json, content_key, json_float, json_form, key_of_json_form, nfc
from furnace.domain.errors import InputError
from furnace.domain.frozen import FrozenDict, freeze

# Limits. Generous for real personas, small enough to keep prompts sane.
MAX_NAME = 120
MAX_IDENTITY = 600
MAX_ITEM = 600
MAX_LIST = 40
MAX_FEW_SHOTS = 20
MAX_FEW_SHOT_TEXT = 4000
MAX_STYLE_NOTES = 4000
MAX_PREFERENCES = 50
MAX_LENGTH_LIMIT = 100_000
MAX_EXTENSIONS_CHARS = 4_000_000  # canonical JSON size of Elixir.extensions
ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,79}$")
TOOL_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$")

NON_CONTENT_FIELDS = frozenset({"id", "version", "created_at", "deleted_at"})


def _text(max_len: int, *, allow_empty: bool = False) -> AfterValidator:
    def check(value: str) -> str:
        value = (value if value.isascii() else unicodedata.normalize("NFC", value)).strip()  # ASCII is NFC
        if not value and not allow_empty:
            raise ValueError("must not be empty")
        if len(value) > max_len:
            raise ValueError(f"is too long ({len(value)} characters, at most {max_len})")
        return value

    return AfterValidator(check)


def _unit(value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"must be between 0 and 1, got {value:g}")
    return float(value)


Name = Annotated[str, _text(MAX_NAME)]
Item = Annotated[str, _text(MAX_ITEM)]
# Strict: a bool or a numeric string is a wrong type, not a number (ints are fine).
Unit = Annotated[float, Field(strict=True), AfterValidator(_unit)]
StrictInt = Annotated[int, Field(strict=True)]


def _unique(items: tuple[str, ...], what: str) -> tuple[str, ...]:
    if len({item.casefold() for item in items}) == len(items):
        return items
    seen: set[str] = set()
    for item in items:
        key = item.casefold()
        if key in seen:
            raise ValueError(f"has a duplicate {what}: {item!r}")
        seen.add(key)
    return items


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=False)


class Tone(_Frozen):
    """Four tone dimensions, each in [0, 1]."""

    formality: Unit = 0.5
    conciseness: Unit = 0.5
    humor: Unit = 0.5
    empathy: Unit = 0.5

    DIMENSIONS: ClassVar[tuple[str, ...]] = ("formality", "conciseness", "humor", "empathy")


class Constraints(_Frozen):
    """Hard constraints the persona must respect."""

    max_length: Annotated[StrictInt, Field(gt=0, le=MAX_LENGTH_LIMIT)] | None = None
    forbidden_topics: Annotated[tuple[Item, ...], Field(max_length=MAX_LIST)] = ()
    must_use_markdown: Annotated[bool, Field(strict=True)] = False

    @field_validator("forbidden_topics")
    @classmethod
    def _unique_topics(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return _unique(v, "topic")


class FewShot(_Frozen):
    """One example exchange, rendered as quoted data."""

    input: Annotated[str, _text(MAX_FEW_SHOT_TEXT)]
    output: Annotated[str, _text(MAX_FEW_SHOT_TEXT)]


class StylePreference(_Frozen):
    """A style preference learned from a user's revisions."""

    dimension: Annotated[str, _text(60)]
    value: Annotated[str, _text(200)]
    evidence: Annotated[str, _text(1000, allow_empty=True)] = ""
    source_revision: str | None = None
    weight: Annotated[float, Field(strict=True, ge=0.0, le=1.0)] = 0.5
    count: Annotated[StrictInt, Field(ge=1)] = 1


class ElixirRef(_Frozen):
    """A pinned reference to one stored elixir version."""

    id: str
    version: int
    content_hash: str

    def __str__(self) -> str:
        return f"{self.id}@{self.version}"


class Elixir(_Frozen):
    """A persona: structured, versioned, immutable."""

    id: str
    version: Annotated[StrictInt, Field(ge=1)] = 1
    name: Name
    language: Literal["zh", "en"] = "en"
    identity: Annotated[str, _text(MAX_IDENTITY)]
    expertise: Annotated[tuple[Item, ...], Field(min_length=1, max_length=MAX_LIST)]
    principles: Annotated[tuple[Item, ...], Field(min_length=1, max_length=MAX_LIST)]
    tone: Tone = Tone()
    constraints: Constraints = Constraints()
    few_shots: Annotated[tuple[FewShot, ...], Field(max_length=MAX_FEW_SHOTS)] = ()
    tools: Annotated[tuple[str, ...], Field(max_length=MAX_LIST)] = ()
    priority: Annotated[StrictInt, Field(ge=0, le=10_000)] = 100
    conflicts_with: Annotated[tuple[str, ...], Field(max_length=MAX_LIST)] = ()
    style_notes: Annotated[str, _text(MAX_STYLE_NOTES, allow_empty=True)] = ""
    style_preferences: Annotated[tuple[StylePreference, ...], Field(max_length=MAX_PREFERENCES)] = ()
    # Data kept from other formats for faithful re-export (e.g. ``card``: the original
    # Character Card). Never rendered into prompts; part of the content hash when
    # non-empty, omitted from dumps (and so from the hash) when empty. Read-only at every
    # depth (furnace.domain.frozen); dumps give plain dicts and lists.
    extensions: dict[str, Any] = Field(default_factory=FrozenDict)
    created_at: datetime | None = None
    deleted_at: datetime | None = None

    @model_validator(mode="before")
    @classmethod
    def _derive_id(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            data.pop("content_hash", None)  # derived, never trusted from input
            if not data.get("id") and isinstance(data.get("name"), str):
                data["id"] = slugify(data["name"])
        return data

    @field_validator("id")
    @classmethod
    def _check_id(cls, v: str) -> str:
        if not ID_PATTERN.match(v):
            raise ValueError(f"must be lowercase letters, digits, '.', '_' or '-' (at most 80), got {v!r}")
        return v

    @field_validator("expertise", "principles")
    @classmethod
    def _unique_items(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return _unique(v, "entry")

    @field_validator("tools")
    @classmethod
    def _check_tools(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for tool in v:
            if not TOOL_PATTERN.match(tool):
                raise ValueError(f"has an invalid tool name {tool!r}")
        return _unique(v, "tool")

    @field_validator("extensions")
    @classmethod
    def _check_extensions(cls, v: dict[str, Any]) -> dict[str, Any]:
        try:
            size = len(canonical_json(v))
        except (TypeError, ValueError) as err:
            raise ValueError(f"must be plain JSON data ({err})") from None
        if size > MAX_EXTENSIONS_CHARS:
            raise ValueError(f"is too large ({size} characters of JSON, at most {MAX_EXTENSIONS_CHARS})")
        frozen: dict[str, Any] = freeze(v)  # read-only at every depth: the cached content_hash can never go stale
        return frozen

    @model_serializer(mode="wrap")
    def _omit_empty_extensions(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and not data.get("extensions"):
            data.pop("extensions", None)
        return data

    @field_validator("few_shots")
    @classmethod
    def _unique_shots(cls, v: tuple[FewShot, ...]) -> tuple[FewShot, ...]:
        seen = set()
        for shot in v:
            key = (shot.input.casefold(), shot.output.casefold())
            if key in seen:
                raise ValueError(f"has a duplicate example (input {shot.input[:40]!r})")
            seen.add(key)
        return v

    @field_validator("conflicts_with")
    @classmethod
    def _no_self_conflict(cls, v: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        # A field validator (not a model one) so the error names ``conflicts_with``.
        names = {str(info.data[k]).casefold() for k in ("id", "name") if k in info.data}
        for other in v:
            if unicodedata.normalize("NFC", other.strip()).casefold() in names:
                raise ValueError(f"names the elixir itself ({other!r})")
        return v

    # --- derived -------------------------------------------------------

    def content(self) -> dict[str, Any]:
        """The content fields as plain JSON data (what the hash covers)."""
        return self.model_dump(mode="json", exclude=set(_NOT_CONTENT))  # pydantic types exclude as a set

    @computed_field  # type: ignore[prop-decorator]
    @cached_property
    def content_hash(self) -> str:
        return self.compute_content_hash()

    def compute_content_hash(self) -> str:
        """``content_key(self.content())``, computed afresh (``content_hash`` caches it), straight from the
        validated fields: no model dump, no second normalising pass over it."""
        try:
            form = _json_form_of(self, _CONTENT_FIELDS)
        except (_CustomDump, TypeError, ValueError):  # the dump path handles it (or says what is wrong)
            return content_key(self.content())
        if not form["extensions"]:
            del form["extensions"]  # as _omit_empty_extensions does in dumps
        key = key_of_json_form(form)
        return key if key is not None else content_key(self.content())

    @property
    def ref(self) -> ElixirRef:
        return ElixirRef(id=self.id, version=self.version, content_hash=self.content_hash)

    @property
    def withdrawn(self) -> bool:
        return self.deleted_at is not None

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Elixir:
        """A copy; the cached ``content_hash`` is dropped so a content update re-hashes."""
        copy = super().model_copy(update=update, deep=deep)
        copy.__dict__.pop("content_hash", None)
        copy.__dict__["extensions"] = freeze(copy.__dict__.get("extensions", {}))  # a deep copy thaws; refreeze
        return copy


_NOT_CONTENT = frozenset(NON_CONTENT_FIELDS) | {"content_hash"}
_CONTENT_FIELDS = tuple(name for name in Elixir.model_fields if name not in _NOT_CONTENT)
_WALKABLE: dict[type[BaseModel], tuple[str, ...] | None] = {}


def _walkable_fields(cls: type[BaseModel]) -> tuple[str, ...] | None:
    """The fields a model dumps as its plain attribute values, or ``None`` if its dump is customised."""
    if cls not in _WALKABLE:
        decorators = cls.__pydantic_decorators__
        plain = (
            not decorators.field_serializers
            and not decorators.model_serializers
            and not cls.__pydantic_computed_fields__
            and all(
                f.serialization_alias is None and f.alias is None and not f.exclude for f in cls.model_fields.values()
            )
        )
        _WALKABLE[cls] = tuple(cls.model_fields) if plain else None
    return _WALKABLE[cls]


class _CustomDump(Exception):
    """A (nested) model customises its dump: walking its attributes would not match it."""


def _json_form_of(model: BaseModel, fields: tuple[str, ...] | None = None) -> dict[str, Any]:
    """``json_form(model.model_dump(mode="json"))`` read straight off a validated model; raises
    :class:`_CustomDump` where a model customises its dump. ``fields``: the fields to take (the caller
    vouches that they dump as their plain values)."""
    fields = fields if fields is not None else _walkable_fields(type(model))
    if fields is None:
        raise _CustomDump(type(model).__name__)
    values = model.__dict__
    out: dict[str, Any] = {}
    for name in fields:
        value = values[name]
        kind = type(value)
        if kind is str:
            out[name] = nfc(value)
        elif kind is tuple:
            out[name] = [
                v if type(v) is str and v.isascii() else _json_form_of(v) if isinstance(v, BaseModel) else json_form(v)
                for v in value
            ]
        elif kind is float:
            out[name] = json_float(value)
        elif kind is int or kind is bool or value is None:
            out[name] = value
        elif isinstance(value, BaseModel):
            out[name] = _json_form_of(value)
        else:
            out[name] = json_form(value)
    return out


def slugify(name: str) -> str:
    """A readable id from a name; non-Latin names fall back to a hash-based id."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")[:60]
    if len(slug) < 2:
        slug = "elixir-" + content_key(unicodedata.normalize("NFC", name.strip()))[:10]
    return slug


def format_validation_error(err: ValidationError, *, root: str = "elixir") -> str:
    """One readable line per problem: ``field.path reason`` (``root`` names a problem of the whole value:
    an elixir's, or nothing for a file the caller already names)."""
    return "; ".join(text for _, text in validation_problems(err, root=root))


_EXPECTED = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "tuple_type": "a list",  # tuple fields take any list; users write lists
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:39] + '…'}"


def _relevant(errors: list[Any]) -> list[Any]:
    # A missing id is only derived noise when the name it derives from is itself invalid.
    if any(e["loc"][:1] == ("name",) for e in errors):
        errors = [e for e in errors if not (e["type"] == "missing" and tuple(e["loc"]) == ("id",))]
    return errors


def validation_problems(err: ValidationError, *, root: str = "elixir") -> list[tuple[str, str]]:
    """Each problem as ``(dotted field, readable message)``, for showing next to a field; a problem of the
    whole value (a rule across fields) is at ``root`` ("" for none: the message alone)."""
    lines = []
    for e in _relevant(err.errors()):
        loc = ".".join(str(p) for p in e["loc"] if p != "__root__") or root
        typ, msg, ctx = e["type"], e["msg"], e.get("ctx") or {}
        if typ == "missing":
            text = f"{loc} is required"
        elif typ == "extra_forbidden":
            text = f"{loc} is not a known field"
        elif typ == "value_error":
            text = f"{loc} {msg.removeprefix('Value error, ')}".lstrip()
        elif typ in ("too_short", "too_long"):
            n = ctx.get("actual_length", len(e["input"]) if hasattr(e["input"], "__len__") else "?")
            if typ == "too_short":
                text = f"{loc} needs at least {ctx.get('min_length')} item(s), got {n}"
            else:
                text = f"{loc} has too many items ({n}, at most {ctx.get('max_length')})"
        elif typ in ("greater_than", "greater_than_equal", "less_than", "less_than_equal") or typ == "literal_error":
            text = f"{loc} must be {msg.removeprefix('Input should be ')}, got {e['input']!r}"
        elif typ in _EXPECTED:
            text = f"{loc} must be {_EXPECTED[typ]}, got {_describe(e['input'])}"
        else:
            text = f"{loc}: {msg}" if loc else msg
        lines.append((loc, text))
    return lines


def parse_elixir(data: Any) -> Elixir:
    """Validate untrusted data into an :class:`Elixir` or raise :class:`InputError`."""
    if not isinstance(data, dict):
        raise InputError(f"an elixir must be a mapping of fields, got {type(data).__name__}")
    try:
        return Elixir.model_validate(data)
    except ValidationError as err:
        relevant = _relevant(err.errors())
        first = relevant[0]["loc"] if relevant else ()
        raise InputError(
            "invalid elixir: " + format_validation_error(err),
            field=".".join(str(p) for p in first) or None,
            problems=validation_problems(err),
        ) from None
    except (TypeError, ValueError) as err:  # canonicalisation of odd values
        raise InputError(f"invalid elixir: {err}") from None


def edit(elixir: Elixir, **changes: Any) -> Elixir:
    """A validated copy of ``elixir`` with ``changes`` applied (same id and version;
    the store assigns the next version when it saves changed content)."""
    data = elixir.model_dump(mode="json", exclude={"content_hash"})
    data.update(changes)
    return parse_elixir(data)
