"""The managed blocks drawn byte for byte as upstream's render.go draws them, rule by rule after
its render_test.go (the golden page is upstream's testdata, with the Clean column render.go
has drawn since it was added)."""

from __future__ import annotations

import copy
from pathlib import Path

from records.formats.model_results import (
    BLOCKS,
    Row,
    cross_surface_notes,
    legend_block,
    overhead_cell,
    ratio_string,
    render_block,
    request_options,
    unpublished,
)

GOLDEN = Path(__file__).parent / "fixtures" / "publish" / "enterprise-dynamic-block.md"
FIXTURE_COMMIT = "1111111111111111111111111111111111111111"


def _ratio(n: int = 0, d: int = 0) -> dict[str, int]:
    return {"numerator": n, "denominator": d}


def two_models() -> list[Row]:
    """render_test.go's twoModels: one configuration, two models, every figure different."""
    first = Row(
        key={
            "model": "anthropic:test-model",
            "surface": "dynamic",
            "mode": "default",
            "tier": "ultimate",
            "corpus_digest": "corpus-1",
            "contract_digest": "contract-1",
            "tool_schema_digest": "tools-1",
            "repeat": 1,
        },
        provenance={
            "commit": FIXTURE_COMMIT,
            "date": "2026-09-16",
            "gitlab_version": "19.3.0",
            "edition": "enterprise",
            "tier": "ultimate",
            "tier_confirmed": True,
            "surface": "dynamic",
            "mode": "default",
            "capability_surface": "full",
            "token_scopes": ["api"],
            "served_tools": 2,
            "provider": "anthropic",
            "model": "test-model",
            "request_options": {"temperature": "0", "max_tokens": "4096"},
            "repeat": 1,
            "corpus_digest": "corpus-1",
            "contract_digest": "contract-1",
        },
        counts={
            "attempts": 10,
            "turns": 31,
            "skipped": 2,
            "unobserved": 1,
            "provider_errors": 1,
            "harness_errors": 0,
            "gitlab_refused": 1,
            "outcomes": {"completed": 8, "failed": 2},
        },
        columns={
            "clean": _ratio(),
            "reached": _ratio(18, 20),
            "accepted_first_time": _ratio(15, 18),
            "argument_fidelity": _ratio(22, 24),
            "confirmation": _ratio(3, 4),
            "unaided": _ratio(7, 10),
            "completion": _ratio(8, 10),
            "overhead": {"discovery": 9, "invalid_params": 3, "steps": 18},
        },
        tokens={"input": 120000, "output": 4200, "cache_created": 30000, "cache_read": 88000},
    )
    second = copy.deepcopy(first)
    second.key["model"] = "openai:other-model"
    second.provenance.update(
        provider="openai",
        model="other-model",
        request_options={"reasoning_effort": "medium", "max_tokens": "4096"},
    )
    second.counts = {
        "attempts": 10,
        "turns": 40,
        "skipped": 0,
        "unobserved": 0,
        "provider_errors": 0,
        "harness_errors": 0,
        "gitlab_refused": 0,
        "outcomes": {"completed": 5, "failed": 5},
    }
    second.columns = {
        "clean": _ratio(),
        "reached": _ratio(14, 20),
        "accepted_first_time": _ratio(9, 14),
        "argument_fidelity": _ratio(17, 24),
        "confirmation": _ratio(),
        "unaided": _ratio(3, 10),
        "completion": _ratio(5, 10),
        "overhead": {"discovery": 14, "invalid_params": 11, "steps": 14},
    }
    second.tokens = {"input": 180000, "output": 9100, "cache_created": 0, "cache_read": 0}
    return [first, second]


def block(start: str):
    return next(b for b in BLOCKS if b.start == f"<!-- START {start} -->")


def changed(row: Row, **key) -> Row:
    out = copy.deepcopy(row)
    out.key.update(key)
    return out


def test_a_detailed_table_matches_the_golden_page():
    got = render_block(block("MODEL EVAL ENTERPRISE DYNAMIC RESULTS"), two_models())
    assert got == GOLDEN.read_text().rstrip("\n")


def test_a_summary_table_carries_the_columns_and_nothing_else():
    got = render_block(block("MODEL EVAL ENTERPRISE DYNAMIC SUMMARY"), two_models())
    assert "18 / 20" in got
    for absent in ("Token scopes", "Cache created", "What the columns leave out"):
        assert absent not in got


def test_no_rows_says_where_the_withdrawn_table_went():
    empties = [b for b in BLOCKS if not b.legend]
    assert len(BLOCKS) == 9 and len(empties) == 8
    for one in empties:
        assert render_block(one, []) == one.empty != ""
    assert render_block(block("MODEL EVAL DYNAMIC SUMMARY"), []) == (
        "Withdrawn. The CE dynamic table published here, last refreshed from a Docker run dated "
        "20260627-232303, is readable at commit `4587cbfb3` and is not reproduced because the "
        "measurement behind it was unsound."
    )


def test_it_selects_by_surface_and_licence():
    free = changed(two_models()[0], tier="free")
    licensed = block("MODEL EVAL ENTERPRISE DYNAMIC SUMMARY")
    assert render_block(licensed, [free]) == licensed.empty
    assert render_block(block("MODEL EVAL DYNAMIC SUMMARY"), [free]).startswith("Compared as")
    meta = block("MODEL EVAL META SUMMARY")
    assert render_block(meta, [free]) == meta.empty


def test_an_opaque_meta_row_carries_what_it_is_not_comparable_with():
    meta = changed(two_models()[0], surface="meta", meta_param_schema="opaque")
    got = render_block(block("MODEL EVAL ENTERPRISE META SUMMARY"), [meta])
    assert (
        "\n\nThese rows ran in the default `opaque` meta schema mode, which withholds parameter "
        "names: a model learned them from the tool description" in got
    )
    compact = changed(meta, meta_param_schema="compact")
    drawn = render_block(block("MODEL EVAL ENTERPRISE META SUMMARY"), [compact])
    assert "withholds parameter" not in drawn


def test_two_configurations_are_two_captioned_tables():
    rows = two_models()
    read_only = changed(rows[0], mode="read-only")
    got = render_block(block("MODEL EVAL ENTERPRISE DYNAMIC SUMMARY"), [*rows, read_only])
    assert got.count("Compared as one table") == 2 and "mode `read-only`" in got
    # Tables are sorted by caption, and apart by one blank line.
    assert got.index("mode `default`") < got.index("mode `read-only`")
    assert (
        "|\n\nCompared as one table because these rows agree on surface `dynamic`, mode `read"
        in got
    )


def test_cross_surface_notes_name_the_peer_row_and_nothing_else():
    rows = two_models()
    peer = changed(rows[0], surface="meta", meta_param_schema="opaque", tool_schema_digest="tm")
    note = cross_surface_notes(rows[:1], [*rows, peer])
    assert note == (
        "Cross-surface comparisons this table takes part in:\n\n"
        "- `anthropic:test-model` may be read beside its `meta` row (meta schema `opaque`): they "
        "agree on model `anthropic:test-model`, mode `default`, tier `ultimate`, corpus "
        "`corpus-1`, contract `contract-1`, repeat 1.\n"
    )
    assert cross_surface_notes(rows[:1], rows) == ""


def test_a_detailed_table_with_a_peer_carries_the_cross_surface_note():
    rows = two_models()
    peer = changed(rows[0], surface="meta", meta_param_schema="opaque", tool_schema_digest="tm")
    got = render_block(block("MODEL EVAL ENTERPRISE DYNAMIC RESULTS"), [*rows, peer])
    assert got.startswith(GOLDEN.read_text().rstrip("\n"))
    assert got.endswith(
        "`max_tokens=4096`, `reasoning_effort=medium` |\n\n"
        "Cross-surface comparisons this table takes part in:\n\n"
        "- `anthropic:test-model` may be read beside its `meta` row (meta schema `opaque`): they "
        "agree on model `anthropic:test-model`, mode `default`, tier `ultimate`, corpus "
        "`corpus-1`, contract `contract-1`, repeat 1."
    )


def test_a_peer_measured_twice_is_named_once():
    rows = two_models()
    first = changed(rows[0], surface="meta", tool_schema_digest="tools-meta-1")
    second = changed(first, tool_schema_digest="tools-meta-2")
    assert cross_surface_notes(rows[:1], [rows[0], first, second]).count("`meta`") == 1


def test_an_individual_peer_is_labelled_with_its_slice_and_what_it_was_shown():
    rows = two_models()
    individual = changed(rows[0], surface="individual", slice_size=128)
    individual.counts["shown"] = {"min": 96, "max": 312, "overflowed": 2}
    note = cross_surface_notes(rows[:1], [rows[0], individual])
    assert "its `individual` row (slice of 128 tools (shown 96 to 312, 2 over budget))" in note


def test_an_individual_row_is_reported_rather_than_drawn():
    individual = changed(two_models()[0], surface="individual", slice_size=128)
    rows = [*two_models(), individual]
    assert [r.name for r in unpublished(rows)] == [individual.name]
    assert "surface=individual" in individual.name and "slice=128" in individual.name
    for b in BLOCKS:
        assert "individual" not in render_block(b, [individual])


def test_the_overhead_cell_prints_both_halves():
    cell = overhead_cell({"discovery": 9, "invalid_params": 3, "steps": 18})
    assert cell == "12 / 18 (9 find, 3 invalid_params)"
    assert overhead_cell({"discovery": 0, "invalid_params": 0, "steps": 0}) == "-"


def test_a_ratio_prints_both_numbers_and_a_dash_on_nothing():
    assert ratio_string(_ratio(3, 4)) == "3 / 4" and ratio_string(_ratio()) == "-"


def test_request_options_are_sorted_and_never_empty():
    options = {"temperature": "0", "max_tokens": "4096"}
    assert request_options(options) == "`max_tokens=4096`, `temperature=0`"
    assert request_options(None) == "-" and request_options({}) == "-"


def test_a_short_commit_is_kept_whole():
    row = two_models()[0]
    row.provenance["commit"] = "abc1234"
    got = render_block(block("MODEL EVAL ENTERPRISE DYNAMIC RESULTS"), [row])
    assert "| `abc1234` | 2026-09-16 |" in got


def test_the_legend_draws_an_invented_row_with_every_column_glossed():
    got = legend_block(258)
    assert got.startswith("**How to read the tables below.** Every figure is a numerator")
    for column in ("Clean", "Overhead", "Attempts", "GitLab refused", "Input", "Cache read"):
        assert f"- **{column}** — " in got
    assert "| `example:not-a-real-model` | 5 / 10 | 17 / 19 |" in got
    assert "> Compared as one table because these rows agree on surface `dynamic`, mode " in got
    assert "10 of 258 cases (`" in got and not got.endswith("\n")
    assert render_block(block("MODEL EVAL LEGEND"), [], 258) == got
