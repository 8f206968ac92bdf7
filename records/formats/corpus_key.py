"""The corpus key file `evaldash-corpus-key/1` (corpus-key.md): reader, validation and digest.

Pure Python, no Django. The digest is recomputed byte for byte as upstream's `modelcorpus.Digest`
builds it (modelrecord.md B.6).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import orjson

FORMAT = "evaldash-corpus-key/1"
TIERS = ("free", "premium", "ultimate")
SURFACES = ("dynamic", "meta", "individual")
RETIRED_CATEGORIES = ("bridge-tool", "simulated-result", "no-recipe")


class CorpusKeyError(Exception):
    def __init__(self, file: str, message: str, *, field: str | None = None) -> None:
        self.file = file
        self.field = field
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        return (
            f"{self.file}: {self.field}: {self.message}"
            if self.field
            else f"{self.file}: {self.message}"
        )

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": None, "field": self.field, "message": self.message}


@dataclass(frozen=True)
class Truth:
    kind: str  # fact, literal, produced, authored, none
    fact: str = ""
    literal: str = ""
    produced_step: int = 0
    produced_field: str = ""


@dataclass(frozen=True)
class Arg:
    name: str
    required: bool
    truth: Truth


@dataclass(frozen=True)
class Step:
    action: str
    standalone: str
    optional: bool
    produces: tuple[str, ...]
    args: tuple[Arg, ...]

    @property
    def name(self) -> str:
        return self.action or self.standalone


@dataclass(frozen=True)
class Case:
    id: str
    prompt: str
    recipe: str
    tier: str
    runner: bool
    admin: bool
    fixture_service: bool
    surfaces_only: tuple[str, ...]
    surfaces_reason: str
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class CatalogEntry:
    read_only: bool
    destructive: bool
    meta_tool: str = ""


@dataclass
class Catalog:
    actions: dict[str, CatalogEntry] = field(default_factory=dict)
    standalone: dict[str, CatalogEntry] = field(default_factory=dict)

    @cached_property  # a key's catalog is read once and never changes; the scorer asks per attempt
    def meta_tools(self) -> frozenset[str]:
        return frozenset(a.meta_tool for a in self.actions.values() if a.meta_tool)


@dataclass
class KeyDocument:
    digest: str
    declared_digest: str
    source: str
    cases: list[Case]
    retired: dict[str, str]
    catalogs: dict[str, Catalog]

    @property
    def verified(self) -> bool:
        return self.digest == self.declared_digest

    def case(self, case_id: str) -> Case | None:
        return self._by_id.get(case_id)

    def __post_init__(self) -> None:
        self._by_id = {c.id: c for c in self.cases}

    def catalog_for(self, tier: str) -> Catalog | None:
        return self.catalogs.get("free" if tier == "ce" else tier)


def _go_bool(v: bool) -> str:
    return "true" if v else "false"


def _go_list(items: tuple[str, ...] | list[str]) -> str:
    return "[" + " ".join(items) + "]"


def digest_of(cases: list[Case]) -> str:
    """SHA-256 of the B.6 byte stream over cases in declaration order, first 16 hex chars."""
    h = hashlib.sha256()
    nul = "\x00"
    for c in cases:
        h.update(
            nul.join(
                [
                    "case",
                    c.id,
                    c.prompt,
                    c.recipe,
                    c.tier or "free",
                    _go_bool(c.runner),
                    _go_bool(c.admin),
                    _go_bool(c.fixture_service),
                    c.surfaces_reason,
                    _go_list(c.surfaces_only),
                ]
            ).encode()
            + b"\n"
        )
        for s in c.steps:
            h.update(
                nul.join(
                    ["step", s.action, s.standalone, _go_bool(s.optional), _go_list(s.produces)]
                ).encode()
                + b"\n"
            )
            for a in s.args:
                t = a.truth
                h.update(
                    nul.join(
                        [
                            "arg",
                            a.name,
                            _go_bool(a.required),
                            t.fact,
                            t.literal,
                            str(t.produced_step),
                            t.produced_field,
                            _go_bool(t.kind == "authored"),
                        ]
                    ).encode()
                    + b"\n"
                )
    return h.hexdigest()[:16]


class _Reader:
    def __init__(self, file: str) -> None:
        self.file = file

    def fail(self, path: str, message: str) -> CorpusKeyError:
        return CorpusKeyError(self.file, message, field=path)

    def obj(self, v: Any, path: str, allowed: set[str]) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise self.fail(path, "must be an object")
        extra = sorted(set(v) - allowed)
        if extra:
            raise self.fail(f"{path}.{extra[0]}", "unknown field")
        return v

    def str_(self, d: dict[str, Any], key: str, path: str, *, required: bool = False) -> str:
        v = d.get(key, "")
        if not isinstance(v, str):
            raise self.fail(f"{path}.{key}", "must be a string")
        if required and not v.strip():
            raise self.fail(f"{path}.{key}", "is required and is empty")
        return v

    def bool_(self, d: dict[str, Any], key: str, path: str) -> bool:
        v = d.get(key, False)
        if not isinstance(v, bool):
            raise self.fail(f"{path}.{key}", "must be true or false")
        return v

    def strs(self, d: dict[str, Any], key: str, path: str) -> tuple[str, ...]:
        v = d.get(key) or []
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise self.fail(f"{path}.{key}", "must be a list of strings")
        return tuple(v)

    def truth(self, v: Any, path: str, step_no: int) -> Truth:
        t = self.obj(v, path, {"fact", "literal", "produced", "authored"})
        if len(t) != 1:
            raise self.fail(
                path, f"must have exactly one of fact, literal, produced, authored (has {len(t)})"
            )
        ((kind, value),) = t.items()
        if kind == "fact":
            if not isinstance(value, str) or not value.strip():
                raise self.fail(f"{path}.fact", "must name a fact")
            return Truth("fact", fact=value)
        if kind == "literal":
            if not isinstance(value, str):
                raise self.fail(f"{path}.literal", "must be a string")
            return Truth("literal", literal=value)
        if kind == "authored":
            if value is not True:
                raise self.fail(f"{path}.authored", "must be true")
            return Truth("authored")
        p = self.obj(value, f"{path}.produced", {"step", "field"})
        step = p.get("step")
        if isinstance(step, bool) or not isinstance(step, int) or not 1 <= step < step_no:
            raise self.fail(
                f"{path}.produced.step", f"must name an earlier step (1..{step_no - 1})"
            )
        fld = p.get("field")
        if not isinstance(fld, str) or not fld.strip():
            raise self.fail(f"{path}.produced.field", "must be a dot path into that step's result")
        return Truth("produced", produced_step=step, produced_field=fld)


def read_corpus_key(data: bytes, file: str, *, allow_digest_mismatch: bool = False) -> KeyDocument:
    r = _Reader(file)
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise CorpusKeyError(file, f"is not valid JSON: {exc}") from None
    doc = r.obj(doc, "$", {"format", "corpus_digest", "source", "cases", "retired", "catalog"})
    if doc.get("format") != FORMAT:
        raise r.fail("format", f"is {doc.get('format')!r}; only {FORMAT!r} is understood")
    declared = r.str_(doc, "corpus_digest", "$", required=True)
    cases: list[Case] = []
    seen: set[str] = set()
    raw_cases = doc.get("cases")
    if not isinstance(raw_cases, list) or not raw_cases:
        raise r.fail("cases", "must be a non-empty list")
    for i, raw in enumerate(raw_cases):
        path = f"cases[{i}]"
        c = r.obj(raw, path, {"id", "prompt", "recipe", "needs", "surfaces", "steps"})
        cid = r.str_(c, "id", path, required=True)
        if cid in seen:
            raise r.fail(f"{path}.id", f"case id {cid!r} appears twice")
        seen.add(cid)
        needs = r.obj(
            c.get("needs", {}), f"{path}.needs", {"tier", "runner", "admin", "fixture_service"}
        )
        tier = r.str_(needs, "tier", f"{path}.needs")
        if tier not in ("", "premium", "ultimate"):
            raise r.fail(f"{path}.needs.tier", f"{tier!r} is not '', 'premium' or 'ultimate'")
        surf = r.obj(c.get("surfaces", {}), f"{path}.surfaces", {"only", "reason"})
        only = r.strs(surf, "only", f"{path}.surfaces")
        for s in only:
            if s not in SURFACES:
                raise r.fail(f"{path}.surfaces.only", f"{s!r} is not a surface")
        reason = r.str_(surf, "reason", f"{path}.surfaces")
        if only and not reason.strip():
            raise r.fail(f"{path}.surfaces.reason", "a surface restriction must carry a reason")
        steps = []
        raw_steps = c.get("steps")
        if not isinstance(raw_steps, list) or not raw_steps:
            raise r.fail(f"{path}.steps", "must be a non-empty list")
        for j, raw_step in enumerate(raw_steps):
            sp = f"{path}.steps[{j}]"
            s = r.obj(raw_step, sp, {"action", "standalone", "optional", "produces", "args"})
            action = r.str_(s, "action", sp)
            standalone = r.str_(s, "standalone", sp)
            if bool(action) == bool(standalone):
                raise r.fail(sp, "must name exactly one of action and standalone")
            args = []
            raw_args = s.get("args") or []
            if not isinstance(raw_args, list):
                raise r.fail(f"{sp}.args", "must be a list")
            for k, raw_arg in enumerate(raw_args):
                ap = f"{sp}.args[{k}]"
                a = r.obj(raw_arg, ap, {"name", "required", "truth"})
                args.append(
                    Arg(
                        r.str_(a, "name", ap, required=True),
                        r.bool_(a, "required", ap),
                        r.truth(a.get("truth"), f"{ap}.truth", j + 1),
                    )
                )
            steps.append(
                Step(
                    action,
                    standalone,
                    r.bool_(s, "optional", sp),
                    r.strs(s, "produces", sp),
                    tuple(args),
                )
            )
        cases.append(
            Case(
                cid,
                r.str_(c, "prompt", path),
                r.str_(c, "recipe", path),
                tier,
                r.bool_(needs, "runner", f"{path}.needs"),
                r.bool_(needs, "admin", f"{path}.needs"),
                r.bool_(needs, "fixture_service", f"{path}.needs"),
                only,
                reason,
                tuple(steps),
            )
        )
    retired: dict[str, str] = {}
    raw_retired = doc.get("retired") or []
    if not isinstance(raw_retired, list):
        raise r.fail("retired", "must be a list")
    for i, raw in enumerate(raw_retired):
        item = r.obj(raw, f"retired[{i}]", {"id", "category"})
        cat = r.str_(item, "category", f"retired[{i}]")
        if cat not in RETIRED_CATEGORIES:
            raise r.fail(
                f"retired[{i}].category", f"{cat!r} is not one of {', '.join(RETIRED_CATEGORIES)}"
            )
        retired[r.str_(item, "id", f"retired[{i}]", required=True)] = cat
    catalogs: dict[str, Catalog] = {}
    raw_catalog = r.obj(doc.get("catalog"), "catalog", set(TIERS))
    if not raw_catalog:
        raise r.fail("catalog", "must hold at least one tier")
    for tier, raw in raw_catalog.items():
        tp = f"catalog.{tier}"
        t = r.obj(raw, tp, {"actions", "standalone"})
        cat = Catalog()
        for kind, target in (("actions", cat.actions), ("standalone", cat.standalone)):
            entries = r.obj(t.get(kind, {}), f"{tp}.{kind}", set(t.get(kind, {}) or {}))
            for name, raw_entry in entries.items():
                ep = f"{tp}.{kind}.{name}"
                allowed = (
                    {"read_only", "destructive", "meta_tool"}
                    if kind == "actions"
                    else {"read_only", "destructive"}
                )
                e = r.obj(raw_entry, ep, allowed)
                target[name] = CatalogEntry(
                    r.bool_(e, "read_only", ep),
                    r.bool_(e, "destructive", ep),
                    r.str_(e, "meta_tool", ep) if kind == "actions" else "",
                )
        catalogs[tier] = cat
    digest = digest_of(cases)
    if digest != declared and not allow_digest_mismatch:
        raise r.fail(
            "corpus_digest",
            f"declares {declared} but its cases digest to {digest}; the file was changed after "
            "export or exported by another version (an operator may override this explicitly)",
        )
    return KeyDocument(digest, declared, r.str_(doc, "source", "$"), cases, retired, catalogs)


def key_to_json(key: KeyDocument) -> dict[str, Any]:
    """The key back in its file shape (used by the synthetic generator and exports)."""

    def truth(t: Truth) -> dict[str, Any]:
        if t.kind == "fact":
            return {"fact": t.fact}
        if t.kind == "literal":
            return {"literal": t.literal}
        if t.kind == "produced":
            return {"produced": {"step": t.produced_step, "field": t.produced_field}}
        return {"authored": True}

    return {
        "format": FORMAT,
        "corpus_digest": key.digest,
        "source": key.source,
        "cases": [
            {
                "id": c.id,
                "prompt": c.prompt,
                "recipe": c.recipe,
                "needs": {
                    "tier": c.tier,
                    "runner": c.runner,
                    "admin": c.admin,
                    "fixture_service": c.fixture_service,
                },
                "surfaces": {"only": list(c.surfaces_only), "reason": c.surfaces_reason},
                "steps": [
                    {
                        "action": s.action,
                        "standalone": s.standalone,
                        "optional": s.optional,
                        "produces": list(s.produces),
                        "args": [
                            {"name": a.name, "required": a.required, "truth": truth(a.truth)}
                            for a in s.args
                        ],
                    }
                    for s in c.steps
                ],
            }
            for c in key.cases
        ],
        "retired": [{"id": k, "category": v} for k, v in key.retired.items()],
        "catalog": {
            tier: {
                "actions": {
                    n: {
                        "read_only": e.read_only,
                        "destructive": e.destructive,
                        "meta_tool": e.meta_tool,
                    }
                    for n, e in cat.actions.items()
                },
                "standalone": {
                    n: {"read_only": e.read_only, "destructive": e.destructive}
                    for n, e in cat.standalone.items()
                },
            }
            for tier, cat in key.catalogs.items()
        },
    }
