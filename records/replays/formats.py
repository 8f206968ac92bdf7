"""Sealed corpus replays (OCA-V0, obscorpus.md): seal, capture, replay and report.

Pure Python, no Django. Byte-for-byte with the upstream Go encodings: the seal id hashes a
canonical compact JSON, and observations and reports are encoded with Go's key order and
omission rules. Inputs are decoded strictly: exact keys, no unknown fields, integer counts only
(a documented choice where Go would match keys case-insensitively).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from records.replays.gojson import compact
from records.replays.secretscreen import match_string

PASS, FAIL, NOT_RUN, NOT_OBSERVED = "PASS", "FAIL", "NOT_RUN", "NOT_OBSERVED"
VERDICTS = (PASS, FAIL, NOT_RUN, NOT_OBSERVED)
OBSERVED = "OBSERVED"
SCORING_RULE = "exact-label-match"
CORPUS_SCHEMA = "oca-corpus/1"
REPORT_SCHEMA = "oca-replay/1"
MAX_SUBJECTS = 1024
MAX_IDENTITY_BYTES = 128
MAX_TOKENS = 10_000_000
MAX_LATENCY_MILLIS = 3_600_000
MAX_OBSERVATIONS = 256
FIELDS = ("identity", "revision", "inputTokens", "outputTokens", "latencyMillis")
_IDENTITY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")
_REVISION = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def secret_shaped(text: str) -> bool:
    """corvint's secretscreen.MatchString, the whole pattern (see `secretscreen`)."""
    return match_string(text)


class ReplayError(Exception):
    """A refusal, with upstream's message (ErrInvalidCorpus, ErrSealMismatch, ...)."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.message = message
        self.field = field
        super().__init__(message)


def _invalid_corpus(message: str) -> ReplayError:
    return ReplayError(f"invalid corpus: {message}")


@dataclass(frozen=True)
class Bound:
    status: str
    value: Any = None
    reason: str = ""

    def as_json(self) -> dict[str, Any]:
        """As Go encodes Text and Count: `value` and `reason` are omitempty (an empty string or
        a nil count is left out, a count of 0 is kept), whatever the status says."""
        out: dict[str, Any] = {"status": self.status}
        if self.value is not None and self.value != "":
            out["value"] = self.value
        if self.reason:
            out["reason"] = self.reason
        return out


def bound_text(text: str, pattern: re.Pattern[str], invalid_reason: str) -> Bound:
    if text == "":
        return Bound(NOT_OBSERVED, reason="not-reported")
    if len(text.encode()) > MAX_IDENTITY_BYTES or not pattern.fullmatch(text):
        return Bound(NOT_OBSERVED, reason=invalid_reason)
    if secret_shaped(text):
        return Bound(NOT_OBSERVED, reason="secret-screened")
    return Bound(OBSERVED, text)


def bound_count(value: int | None, limit: int) -> Bound:
    if value is None:
        return Bound(NOT_OBSERVED, reason="not-reported")
    if value < 0 or value > limit:
        return Bound(NOT_OBSERVED, reason="out-of-bounds")
    return Bound(OBSERVED, value)


# --- corpus and seal -------------------------------------------------------------------------------


@dataclass
class Sealed:
    seal_id: str
    subjects: list[tuple[str, str]]  # sorted by id
    labels: dict[str, str]
    evaluator_revision: str

    def canonical(self) -> dict[str, Any]:
        return {
            "subjects": [{"id": i, "revision": r} for i, r in self.subjects],
            "labels": dict(sorted(self.labels.items())),
            "evaluatorRevision": self.evaluator_revision,
            "scoringRule": SCORING_RULE,
        }


def _exact_keys(obj: Any, allowed: set[str], path: str, required: set[str] = frozenset()) -> dict:
    if not isinstance(obj, dict):
        raise ReplayError(f"{path} must be a JSON object", field=path)
    for key in obj:
        if key not in allowed:
            raise ReplayError(f"{path}.{key}: unknown field", field=f"{path}.{key}")
    for key in required:
        if key not in obj:
            raise ReplayError(f"{path}.{key}: missing", field=f"{path}.{key}")
    return obj


def _string(obj: dict[str, Any], key: str, path: str) -> str:
    value = obj.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ReplayError(f"{path}.{key}: must be a string", field=f"{path}.{key}")
    return value


def seal(corpus: Any) -> Sealed:
    """Validate a Corpus in upstream's order and seal it (ErrInvalidCorpus on failure)."""
    c = _exact_keys(corpus, {"subjects", "labels", "evaluatorRevision", "scoringRule"}, "corpus")
    # As Go decodes into []Subject and map[string]string: null is empty, any other type is an
    # error ("labels": [], "" or false are refused, not read as no labels).
    subjects_in = c.get("subjects")
    if subjects_in is None:
        subjects_in = []
    elif not isinstance(subjects_in, list):
        raise ReplayError("corpus.subjects: must be a list", field="corpus.subjects")
    labels_in = c.get("labels")
    if labels_in is None:
        labels_in = {}
    elif not isinstance(labels_in, dict):
        raise ReplayError("corpus.labels: must be an object", field="corpus.labels")
    n = len(subjects_in)
    if n == 0 or n > MAX_SUBJECTS:
        raise _invalid_corpus(f"subject count {n} outside 1..{MAX_SUBJECTS}")
    if _string(c, "scoringRule", "corpus") != SCORING_RULE:
        raise _invalid_corpus("unknown scoring rule")
    evaluator = _string(c, "evaluatorRevision", "corpus")
    if bound_text(evaluator, _REVISION, "revision-not-immutable").status != OBSERVED:
        raise _invalid_corpus("evaluator revision is not an immutable revision")
    seen: dict[str, str] = {}
    for i, raw in enumerate(subjects_in):
        s = _exact_keys(raw, {"id", "revision"}, f"corpus.subjects[{i}]")
        sid = _string(s, "id", f"corpus.subjects[{i}]")
        if bound_text(sid, _IDENTITY, "unbounded-text").status != OBSERVED:
            raise _invalid_corpus("subject identity is not bounded")
        if sid in seen:
            raise _invalid_corpus(f"duplicate subject {sid}")
        rev = _string(s, "revision", f"corpus.subjects[{i}]")
        if bound_text(rev, _REVISION, "revision-not-immutable").status != OBSERVED:
            raise _invalid_corpus(f"subject {sid} revision is not an immutable revision")
        seen[sid] = rev
    labels: dict[str, str] = {}
    for sid, label in labels_in.items():
        if sid not in seen:
            raise _invalid_corpus("label for unsealed subject")
        if not isinstance(label, str):
            raise ReplayError(
                f"corpus.labels.{sid}: must be a string", field=f"corpus.labels.{sid}"
            )
        if secret_shaped(label):
            raise _invalid_corpus(f"label for {sid} is secret-shaped")
        if bound_text(label, _IDENTITY, "unbounded-text").status != OBSERVED:
            raise _invalid_corpus(f"label for {sid} is not bounded")
        labels[sid] = label
    subjects = sorted(seen.items())
    return Sealed(_seal_id(subjects, labels, evaluator), subjects, labels, evaluator)


def canonical_bytes(
    subjects: list[tuple[str, str]], labels: dict[str, str], evaluator: str
) -> bytes:
    doc = {
        "schema": CORPUS_SCHEMA,
        "subjects": [{"id": i, "revision": r} for i, r in subjects],
        "labels": [[i, labels[i]] for i, _ in subjects if i in labels],
        "evaluatorRevision": evaluator,
        "scoringRule": SCORING_RULE,
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def _seal_id(subjects: list[tuple[str, str]], labels: dict[str, str], evaluator: str) -> str:
    return hashlib.sha256(canonical_bytes(subjects, labels, evaluator)).hexdigest()


def reuse(sealed: Sealed, candidate: Any) -> Sealed:
    other = seal(candidate)
    if other.seal_id != sealed.seal_id:
        raise ReplayError(
            f"changed corpus inputs are a new corpus: sealed {sealed.seal_id}, "
            f"candidate {other.seal_id}"
        )
    return other


# --- capture -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Observation:
    status: str
    reason: str
    fields: dict[str, Bound]

    @property
    def complete(self) -> bool:
        return self.status == OBSERVED and all(b.status == OBSERVED for b in self.fields.values())

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status}
        if self.reason:
            out["reason"] = self.reason
        for name in FIELDS:
            out[name] = self.fields[name].as_json()
        return out


def _unbound(reason: str) -> Observation:
    b = Bound(NOT_OBSERVED, reason=reason)
    return Observation(NOT_OBSERVED, reason, dict.fromkeys(FIELDS, b))


def _int64(value: Any, where: str) -> int | None:
    """A *int64 as Go decodes it: null is nil; a whole number within int64 is its value."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ReplayError(f"{where}: must be a whole number or null, not {value!r}", field=where)
    if not -(2**63) <= value < 2**63:
        raise ReplayError(f"{where}: {value} does not fit a 64-bit integer", field=where)
    return value


def _count(raw: dict[str, Any], name: str, path: str) -> int | None:
    return _int64(raw.get(name), f"{path}.{name}")


def read_raw(raw: Any, path: str = "telemetry") -> dict[str, Any]:
    """A RawTelemetry record, strictly: five known fields, strings and integer counts."""
    r = _exact_keys(raw, set(FIELDS), path)
    return {
        "identity": _string(r, "identity", path),
        "revision": _string(r, "revision", path),
        "inputTokens": _count(r, "inputTokens", path),
        "outputTokens": _count(r, "outputTokens", path),
        "latencyMillis": _count(r, "latencyMillis", path),
    }


def capture(raw: dict[str, Any]) -> Observation:
    """RawTelemetry -> Observation. Never fails: problems become NOT_OBSERVED fields."""
    identity = bound_text(raw.get("identity") or "", _IDENTITY, "unbounded-text")
    if identity.status != OBSERVED:
        return _unbound("identity-not-observed")
    return Observation(
        OBSERVED,
        "",
        {
            "identity": identity,
            "revision": bound_text(raw.get("revision") or "", _REVISION, "revision-not-immutable"),
            "inputTokens": bound_count(raw.get("inputTokens"), MAX_TOKENS),
            "outputTokens": bound_count(raw.get("outputTokens"), MAX_TOKENS),
            "latencyMillis": bound_count(raw.get("latencyMillis"), MAX_LATENCY_MILLIS),
        },
    )


def capture_from(source: Any) -> Observation:
    """Fail-open capture: an error (or anything raised) becomes capture-failed everywhere."""
    try:
        raw = source()
    except Exception:  # noqa: BLE001 - fail-open is the rule
        return _unbound("capture-failed")
    return capture(raw)


@dataclass
class Batch:
    observations: list[Observation]
    dropped: int

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "observations": [o.as_json() for o in self.observations],
            "dropped": self.dropped,
        }
        if self.dropped:
            out["droppedReason"] = "count-bound"
        return out


def capture_all(raws: list[dict[str, Any]]) -> Batch:
    kept = raws[:MAX_OBSERVATIONS]
    return Batch([capture(r) for r in kept], max(0, len(raws) - MAX_OBSERVATIONS))


def read_observation(obj: Any, path: str = "telemetry") -> Observation:
    """An already-captured Observation as a result carries it."""
    o = _exact_keys(obj, {"status", "reason", *FIELDS}, path)
    fields = {}
    for name in FIELDS:
        given = o.get(name)
        # null leaves the zero value, as Go decodes a struct; [] or 0 is a type error.
        f = _exact_keys(
            {} if given is None else given, {"status", "value", "reason"}, f"{path}.{name}"
        )
        value = f.get("value")
        if name in ("identity", "revision"):
            if value is not None and not isinstance(value, str):
                raise ReplayError(
                    f"{path}.{name}.value: must be a string", field=f"{path}.{name}.value"
                )
        else:
            value = _int64(value, f"{path}.{name}.value")
        fields[name] = Bound(
            _string(f, "status", f"{path}.{name}"), value, _string(f, "reason", f"{path}.{name}")
        )
    return Observation(_string(o, "status", path), _string(o, "reason", path), fields)


def telemetry_observed(obs: Observation | None) -> bool:
    """Complete as decoded, and complete again when its values are captured afresh."""
    if obs is None or not obs.complete:
        return False
    raw = {name: obs.fields[name].value for name in FIELDS}
    if not isinstance(raw["identity"], str) or not isinstance(raw["revision"], str):
        return False
    return capture(raw).complete


# --- results, replay and report ------------------------------------------------------------------------


@dataclass
class Result:
    seal_id: str
    subject_id: str
    outcome: str
    telemetry: Observation | None
    raw_telemetry: dict[str, Any] | None = None


def read_result(obj: Any, path: str) -> Result:
    r = _exact_keys(obj, {"sealId", "subjectId", "outcome", "telemetry"}, path)
    telemetry = r.get("telemetry")
    obs: Observation | None = None
    raw = None
    if telemetry is not None:
        if isinstance(telemetry, dict) and "status" in telemetry:
            obs = read_observation(telemetry, f"{path}.telemetry")
        else:
            raw = read_raw(telemetry, f"{path}.telemetry")
            obs = capture(raw)  # raw telemetry is captured on the way in
    return Result(
        _string(r, "sealId", path),
        _string(r, "subjectId", path),
        _string(r, "outcome", path),
        obs,
        raw,
    )


@dataclass
class Report:
    seal_id: str
    verdicts: list[dict[str, str]]
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def denominator(self) -> int:
        return len(self.verdicts)

    @property
    def overall(self) -> str:
        c = self.counts
        if c[FAIL] > 0:
            return FAIL
        if c[NOT_OBSERVED] > 0:
            return NOT_OBSERVED
        if c[NOT_RUN] > 0 or self.denominator == 0:
            return NOT_RUN
        return PASS

    def as_json(self) -> dict[str, Any]:
        return {
            "schema": REPORT_SCHEMA,
            "sealId": self.seal_id,
            "evidence": "owner-labelled",
            "authority": "none",
            "independentValidation": False,
            "overall": self.overall,
            "pass": self.counts[PASS],
            "fail": self.counts[FAIL],
            "notRun": self.counts[NOT_RUN],
            "notObserved": self.counts[NOT_OBSERVED],
            "denominator": self.denominator,
            "verdicts": self.verdicts,
        }

    def encode(self) -> bytes:
        """The Go encoding, compact, key order as upstream."""
        return json.dumps(self.as_json(), separators=(",", ":")).encode()


def replay(sealed: Sealed, results: list[Result]) -> Report:
    by_subject: dict[str, Result] = {}
    subject_ids = {sid for sid, _ in sealed.subjects}
    for r in results:
        if r.seal_id != sealed.seal_id:
            raise ReplayError("result is not bound to this sealed corpus")
        if r.subject_id not in subject_ids:
            raise ReplayError("invalid replay results: unsealed subject")
        if r.subject_id in by_subject:
            raise ReplayError("invalid replay results: duplicate subject result")
        by_subject[r.subject_id] = r
    verdicts = []
    counts = dict.fromkeys(VERDICTS, 0)
    for sid, _ in sealed.subjects:
        verdict, reason = _score(sealed, by_subject.get(sid), sid)
        counts[verdict] += 1
        entry = {"subjectId": sid, "verdict": verdict}
        if reason:
            entry["reason"] = reason
        verdicts.append(entry)
    return Report(sealed.seal_id, verdicts, counts)


def _score(sealed: Sealed, result: Result | None, sid: str) -> tuple[str, str]:
    if result is None:
        return NOT_RUN, "result-missing"
    label = sealed.labels.get(sid)
    if label is None:
        return NOT_OBSERVED, "label-missing"
    outcome = bound_text(result.outcome, _IDENTITY, "unbounded-text")
    if outcome.status != OBSERVED:
        reason = "verifier-result-missing" if outcome.reason == "not-reported" else outcome.reason
        return NOT_OBSERVED, reason
    if result.outcome != label:
        return FAIL, ""
    if not telemetry_observed(result.telemetry):
        return NOT_OBSERVED, "telemetry-not-observed"
    return PASS, ""


def check_report(report: Report, supplied: bytes) -> None:
    """A supplied report must be the recomputed one byte for byte once compacted, as upstream's
    test compares it: reordered keys, 1.0 for 1 or a field left out are a mismatch."""
    want, got = compact(supplied), report.encode()
    if want != got:
        at = next((i for i, (a, b) in enumerate(zip(want, got, strict=False)) if a != b), None)
        at = min(len(want), len(got)) if at is None else at
        raise ReplayError(
            "the supplied report does not match the one recomputed from the corpus and results "
            f"(compacted, they first differ at byte {at + 1:,}: supplied "
            f"{want[at : at + 40].decode(errors='replace')!r}, recomputed "
            f"{got[at : at + 40].decode(errors='replace')!r})",
            field="want",
        )
