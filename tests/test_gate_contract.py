"""The gate's contract with CI: an answer without a baseline, one unit throughout, absolute
links, and a Markdown comment in which no value a shard wrote can become markup."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from django.test import override_settings

from records.models import ApiToken, Run
from records.queries.gate import gate, markdown_code, resolve

pytestmark = pytest.mark.django_db
REGRESSED, BEFORE = "run-2026-11-23-f00dfa", "run-2026-11-16-a1b2c3"
HOSTILE = "x`y``z <img src=x onerror=alert(1)> [x](https://evil.example) a|b\nc\r\u202ed &amp;"


@pytest.fixture
def auth(db):
    _, raw = ApiToken.issue("ci")
    return {"Authorization": f"Bearer {raw}"}


def code_spans(line: str) -> list[str]:
    """The contents of a line's code spans, as CommonMark reads them (fences of equal length,
    one space stripped from each side of a padded span)."""
    out, i = [], 0
    while (m := re.compile(r"`+").search(line, i)) is not None:
        fence = m.group()
        end = re.compile(rf"(?<!`){fence}(?!`)").search(line, m.end())
        assert end is not None, f"unclosed code span in {line!r}"
        text = line[m.end() : end.start()]
        if len(text) > 1 and text[0] == text[-1] == " " and text.strip(" "):
            text = text[1:-1]
        out.append(text)
        i = end.end()
    return out


def outside_code(line: str) -> str:
    return re.sub(r"(`+).*?(?<!`)\1(?!`)", "", line)


def test_a_value_becomes_one_code_span_whatever_it_holds():
    for value in [HOSTILE, "`", "``a", "a`", " lead", "|pipe|", "plain"]:
        span = markdown_code(value, in_table=True)
        assert "\n" not in span and "\r" not in span and "\u202e" not in span
        (text,) = code_spans(span)
        assert text.replace("\\|", "|") == (
            value.replace("\n", "\\u000a").replace("\r", "\\u000d").replace("\u202e", "\\u202e")
        )
        assert outside_code(span) == ""
    assert "|" not in markdown_code("a|b", in_table=True).replace("\\|", "")


def test_every_value_of_the_comment_is_escaped(demo, auth, client):
    run, baseline = demo[REGRESSED], demo[BEFORE]
    Run.objects.filter(pk=run.pk).update(run_id="cand " + HOSTILE)
    Run.objects.filter(pk=baseline.pk).update(run_id="base " + HOSTILE)
    run.refresh_from_db()
    baseline.refresh_from_db()
    result = gate(run, baseline, "Clean")
    assert result.regressed
    # Model, surface, mode, test and case ids as a hostile shard could have spelt them.
    for r in result.regressed:
        r["key"] = {"model": "m " + HOSTILE, "surface": "s " + HOSTILE, "mode": "d " + HOSTILE}
        r["test"] = "t " + HOSTILE
        r["cases_regressed"] = ["c " + HOSTILE, "`MT-1`"]
    text = result.markdown()
    lines = text.splitlines()
    # No value broke a line: a head, a blank line, the table's two header lines and its rows,
    # then the failure modes new since the baseline, a line each (their text in code spans).
    assert len(lines) == 4 + len(result.regressed) + len(result.modes_lines())
    for line in lines:
        bare = outside_code(line)
        assert "<" not in bare and "`" not in bare and "[x]" not in bare
        assert "\u202e" not in line
    head = code_spans(lines[0])
    assert (
        "cand "
        + HOSTILE.replace("\n", "\\u000a").replace("\r", "\\u000d").replace("\u202e", "\\u202e")
        in head
    )
    row = lines[4]
    # The row's cells are its twelve columns: no pipe of a value split one.
    assert len(re.findall(r"(?<!\\)\|", outside_code(row))) == 13
    assert any(span.startswith("m x") for span in code_spans(row))
    assert "MT-1" in " ".join(code_spans(row))


def test_with_no_earlier_run_the_gate_passes_and_says_why(demo, auth, client):
    r = client.get(f"/api/v1/runs/{BEFORE}/gate?baseline=previous", headers=auth)
    body = r.json()
    assert r.status_code == 200
    assert body["passed"] is True and body["baseline"] is None
    assert "no earlier run" in body["reason"] and body["rows_compared"] == 0
    assert body["comparison_url"] is None and "no baseline" in body["markdown"]


def test_require_baseline_turns_no_earlier_run_into_a_failure(demo, auth, client, capsys):
    r = client.get(f"/api/v1/runs/{BEFORE}/gate?require_baseline=1", headers=auth)
    body = r.json()
    assert r.status_code == 200 and body["passed"] is False and body["baseline"] is None
    assert "required" in body["markdown"]
    r = client.get(f"/api/v1/runs/{BEFORE}/gate?require_baseline=maybe", headers=auth)
    assert r.status_code == 400 and r.json()["field"] == "require_baseline"
    call_command("gate", BEFORE)
    assert "passed" in capsys.readouterr().out
    with pytest.raises(SystemExit) as info:
        call_command("gate", BEFORE, "--require-baseline")
    assert info.value.code == 1


def test_every_figure_is_in_percent_as_the_field_names_say(demo):
    result = gate(*resolve(REGRESSED, BEFORE), "Clean")
    (row,) = result.regressed
    low, high = row["interval_points"]
    assert low <= row["delta_points"] <= high < 0
    assert row["delta_points"] == pytest.approx(row["candidate_percent"] - row["baseline_percent"])
    assert 1 < row["baseline_percent"] <= 100
    assert "interval" not in row and "baseline_rate" not in row
    table_row = result.markdown().splitlines()[4]
    assert f"{row['delta_points']:+.1f} | {low:+.1f} to {high:+.1f}" in table_row


def test_the_comment_links_the_run_and_the_comparison_by_absolute_url(demo, auth, client, viewer):
    run, baseline = demo[REGRESSED], demo[BEFORE]
    r = client.get(f"/api/v1/runs/{REGRESSED}/gate?baseline=previous", headers=auth).json()
    assert r["run_url"] == f"http://testserver/runs/{run.pk}/"
    assert r["comparison_url"] == (
        f"http://testserver/compare/?kind=runs&baseline={baseline.pk}&candidate={run.pk}"
    )
    assert f"[run]({r['run_url']})" in r["markdown"]
    assert f"[the comparison]({r['comparison_url']})" in r["markdown"]
    page = client.get(r["comparison_url"].removeprefix("http://testserver"))
    assert page.status_code == 200 and baseline.run_id in page.content.decode()
    with override_settings(EVALDASH_PUBLIC_URL="https://evaldash.example"):
        r = client.get(f"/api/v1/runs/{REGRESSED}/gate", headers=auth).json()
    assert r["run_url"] == f"https://evaldash.example/runs/{run.pk}/"
    assert r["comparison_url"].startswith("https://evaldash.example/compare/?")
    # The comment says which runs, which column and which test.
    head = r["markdown"].splitlines()[0]
    assert REGRESSED in head and BEFORE in head and "`Clean`" in head and "McNemar" in head


def test_the_public_url_setting_refuses_a_malformed_address(monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from evaldash.settings import env_url

    for bad in ["evaldash.example", "ftp://x", "https://x/?a=1", "https://u:p@x", "https://"]:
        monkeypatch.setenv("EVALDASH_PUBLIC_URL", bad)
        with pytest.raises(ImproperlyConfigured, match="EVALDASH_PUBLIC_URL"):
            env_url("EVALDASH_PUBLIC_URL")
    monkeypatch.setenv("EVALDASH_PUBLIC_URL", "https://evaldash.example/")
    assert env_url("EVALDASH_PUBLIC_URL") == "https://evaldash.example"


def test_a_gate_that_tested_nothing_says_so_where_it_names_the_rule(demo, auth, client):
    # Every row of the candidate on a surface the baseline never ran: nothing pairs.
    from records.models import ScoreRow

    ScoreRow.objects.filter(scoring=demo[REGRESSED].latest_scoring()).update(surface="elsewhere")
    r = client.get(
        f"/api/v1/runs/{REGRESSED}/gate?baseline={BEFORE}&allow_empty=1", headers=auth
    ).json()
    assert r["rows_compared"] == 0 and r["problem"] and r["passed"] is True
    assert r["rule"] == "nothing tested"
    head = r["markdown"].splitlines()[0]
    assert "over 0 rows" not in head and "; nothing tested; [the comparison](" in head
