"""How often does the gate's rule fail a run that changed nothing, and how often does it catch a
real drop? Measured on runs the benchmark's generator writes (`records.devtools.synth`), read
and scored by the real reader and scorer in memory (no database), and decided by the one rule
every page and the gate use (`records.evidence`).

A null pair is two runs that differ only by the generator's seed: same models, same surfaces,
same true rates. A planted drop takes one row of the candidate and turns each of its Clean
attempts into a failed one with chance `points / rate`, so the row's expected Clean rate falls
by exactly that many points while every other row stays a null row.
"""

from __future__ import annotations

import io
import random
from dataclasses import dataclass
from datetime import datetime

from records import evidence, stats
from records.devtools.bench import CORPUS_CASES, bench_models
from records.devtools.synth import load_demo_key, widen_key, write_run
from records.formats.corpus_key import KeyDocument
from records.formats.shard import read_shard_bytes
from records.scorer.score import COUNTED_APART, attempt_inputs, is_clean, score_attempt

Figures = dict[tuple[str, str, str], dict[str, tuple[int, int]]]  # row: case: (clean, counted)


def corpus(cases: int = CORPUS_CASES) -> KeyDocument:
    return widen_key(load_demo_key(), cases)


def run_figures(seed: int, attempts: int, key: KeyDocument, repeat: int = 1) -> Figures:
    """One generated run's Clean and counted attempts per row (model, surface, mode) and case,
    each case attempted `repeat` times a row."""
    out = io.BytesIO()
    write_run(
        out,
        key,
        run_id=f"sim-{seed}",
        commit=f"{seed:040x}",
        started_at=datetime(2026, 11, 1, 9),
        seed=seed,
        models=bench_models(attempts),
        max_attempts=attempts,
        repeat=repeat,
    )
    shard = read_shard_bytes(out.getvalue(), f"modeleval-{seed:06d}.jsonl")
    figures: Figures = {}
    for a in attempt_inputs(shard):
        v = score_attempt(a, key)
        clean, counted = figures.setdefault((a.model, a.surface, a.mode), {}).get(a.case, (0, 0))
        counts = v.outcome not in COUNTED_APART
        figures[(a.model, a.surface, a.mode)][a.case] = (
            clean + int(counts and is_clean(v)),
            counted + int(counts),
        )
    return figures


def plant_drop(figures: Figures, row: tuple[str, str, str], points: float, seed: int) -> Figures:
    """`figures` with one row's Clean rate lowered by `points` in expectation."""
    cases = figures[row]
    clean = sum(c for c, _ in cases.values())
    counted = sum(d for _, d in cases.values())
    chance = min(1.0, points / 100 / (clean / counted)) if clean else 0.0
    rng = random.Random(seed)
    dropped = {
        case: (sum(1 for _ in range(c) if rng.random() >= chance), d)
        for case, (c, d) in sorted(cases.items())
    }
    return {**figures, row: dropped}


def decisions(baseline: Figures, candidate: Figures) -> list[evidence.Decision | None]:
    """Every row both runs hold, tested case by case on Clean and decided as one family."""
    tests = []
    for row in sorted(set(baseline) & set(candidate)):
        a, b = baseline[row], candidate[row]
        shared = sorted(set(a) & set(b))
        tests.append(stats.compare([a[c] for c in shared], [b[c] for c in shared]))
    return evidence.decide(tests)


@dataclass
class Simulation:
    pairs: int
    rows: int  # rows tested in each pair
    false_fails: int  # null pairs the gate failed (any row regressed)
    false_fails_unadjusted: int  # ... had each row been tested alone at 5%
    caught: dict[float, int]  # planted drop (points): pairs whose dropped row was regressed

    def rate(self, n: int) -> float:
        return n / self.pairs


def simulate(
    pairs: int = 200,
    attempts: int = 1000,
    first_seed: int = 301,
    *,
    cases: int = CORPUS_CASES,
    repeat: int = 1,
) -> Simulation:
    """`pairs` consecutive seed pairs (seed s against s + 1) of `attempts` attempts each (over a
    corpus of `cases` cases, each attempted `repeat` times a row): how many the gate fails,
    with the rule and without its adjustment, and how many planted drops of 10 and 20 points
    (on one row, a different row each pair) it finds."""
    key = corpus(cases)
    runs = [run_figures(first_seed + i, attempts, key, repeat) for i in range(pairs + 1)]
    result = Simulation(pairs, 0, 0, 0, {10.0: 0, 20.0: 0})
    for i in range(pairs):
        base, cand = runs[i], runs[i + 1]
        decided = decisions(base, cand)
        result.rows = max(result.rows, sum(1 for d in decided if d))
        result.false_fails += any(d and d.label == evidence.REGRESSED for d in decided)
        result.false_fails_unadjusted += any(
            d and d.test.label == evidence.REGRESSED for d in decided
        )
        rows = sorted(set(base) & set(cand))
        row = rows[i % len(rows)]
        for points in result.caught:
            planted = plant_drop(cand, row, points, seed=first_seed + i)
            decided = dict(zip(rows, decisions(base, planted), strict=True))
            d = decided[row]
            result.caught[points] += bool(d and d.label == evidence.REGRESSED)
    return result
