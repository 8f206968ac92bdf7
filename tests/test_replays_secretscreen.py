"""The secret screen against corvint's own test cases (`secretscreen_test.go` and its
`testdata/parity.json`: every baseline text with its answer, every writer-only text as a match)
and probes on both sides of the branches evaldash used to answer differently. Only MatchString
is ported: the sealed-replay rules ask whether text is secret-shaped, never for a redaction."""

from __future__ import annotations

import pytest

from records.replays.secretscreen import match_string

UPSTREAM = [
    # parity.json, baseline
    ("token=abcdefghijklmnopqrstuvwxyz", True),
    ("password = correct-horse-battery-staple", True),
    ("Authorization: bearer abcdefghijklmnop", True),
    ("-----BEGIN PRIVATE KEY-----", True),
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----", True),
    ("https://user:pass@example.invalid", True),
    ("github_pat_abcdefghijklmnopqrstuvwxyz", True),
    ("AKIAABCDEFGHIJKLMNOP", True),
    ("sk-abcdefghijklmnopqrstuvwxyz", True),
    ("Bearer abcdefghijklmnopqrstuvwxyz", True),
    ("abcdefghij.abcdefghij.abcdefghij", True),
    ("authority: project", False),
    ('{"authority":"project","task":"repair config"}', False),
    ('{"message":"rotate password"}', False),
    ("password= ", False),
    ("credential abcdefghijklmnop", False),
    ("docs/plans/AGENT-TASK-MANAGER-LANDSCAPE-2026-09-04.md", False),
    ("This test should pass.", False),
    ("hf_test", False),
    ("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", False),
    ("add --token flag", False),
    ("add --password flag and -p option", False),
    ("docker login -p value", False),
    ("mysql --password $DB_PASSWORD", False),
    ("git log -p HEAD~3", False),
    ("docker run -u 1000:1000 -p 8080:80 image", False),
    ("curl http://svc-users.example.invalid:8080/list", False),
    ('curl -H "X-User: a" https://a-u.example.invalid:8080/x', False),
    ("ssh://git@github.com/org/repo", False),
    ("mysql --password $DB_PASSWORD2 app", False),
    ('mysql --password "${DB_PASS2}" app', False),
    # parity.json, writer only (all match)
    ('{"password":"synthetic-example-value"}', True),
    ('{"api_key":"synthetic-example-value"}', True),
    ('{"service.Access-Key" : "synthetic-example-value"}', True),
    ('{"credentials"\u2003:\u2003"synthetic-example-value"}', True),
    ("credential=abcdefghijklmnopqrstuvwxyz", True),
    ("service_credentials: abcdefghijklmnopqrstuvwxyz", True),
    ("passphrase = correct-horse-battery-staple", True),
    ("database.passwd: abcdefghijklmnopqrstuvwxyz", True),
    ('config/{"password":"top secret value","task":"repair config"}.go', True),
    ('{"password":"top secret\nvalue\n', True),
    ('{"password":"', True),
    ("export DB_PASS='synthetic-example-value'", True),
    ("whsec_abcdefghijklmnopqrstuvwxyz0123456789", True),
    ("hf_abcdefghijklmnopqrstuvwxyz0123", True),
    ("dop_v1_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", True),
    ("xapp-1-A0123456789-0123456789012-abcdefabcdefabcdefabcdefabcdefab", True),
    ("https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX", True),
    ("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Zm9vYmFy==;x=y", True),
    ("ya29.a0AfH6SMBx3exampleTokenValue0123", True),
    ("GOCSPX-abcdefghijklmnopqrstuvwx12", True),
    ("shpat_0123456789abcdef0123456789abcdef", True),
    ("glrt-abcdefghijklmnopqrst gldt-abcdefghijklmnopqrst", True),
    ("git clone https://ghs_x@github.com/org/repo", True),
    ("https://0123456789abcdef0123456789abcdef01234567@github.com/org/repo", True),
    ("mysql --password hunter2 app", True),
    ("deploy --api-token abc123def now", True),
    ("docker login -p hunter2 registry.example", True),
    ("mysql -u root -p=hunter2 app", True),
    ("curl -sS -u admin:pass https://example.invalid", True),
    ('mysql --password "hunter2 more words" app', True),
    ("deploy --token 'abc123 def' now", True),
    ('curl --user "admin:pa ss" https://example.invalid', True),
    # secretscreen_test.go
    ("token = abcdefghijklmnopqrstuvwxyz", True),
    ("toKen=value", True),
    ("glpat-abcdefghijklmnopqrst", True),
    ("roadmap: add workflow gate", False),
    ("git remote add origin https://user:p@ssw0rd@example.invalid/org/repo", True),
    ("curl -H 'Authorization=Token opaque0123456789abcdef' https://example.invalid", True),
]

PROBES = [
    # Slack tokens: xox, a letter, a dash (a digit or a dash there is no Slack token).
    ("xoxb-0123456789", True),
    ("xox1-0123456789", False),
    ("xox--0123456789", False),
    ("xoxb-012345678", False),  # nine after the dash: below the floor
    # Webhook secrets take + / = _ - as well.
    ("whsec_abc+def/ghi=jkl_mno-pq", True),
    ("whsec_abc+def/ghi=jkl", False),  # 15 after the prefix
    # Credential-bearing flags and URLs.
    ("--password x", False),  # a value needs a letter and a digit (upstream decision 0164)
    ("--password x1", True),
    ("curl -u a:b", True),
    ("curl -uab", False),
    ("https://ghp_x@host", True),
    ("https://deploy@host", False),
    # A bare "pass" must end the field name.
    ("passed: all checks", False),
    ("db_pass: x", True),
    # Matches inside a go test pass line are not secrets; the same text elsewhere is.
    ("--- PASS: TestToken=abc (0.01s)", False),
    ("TestToken=abc", True),
    # Identity-shaped text the sealed corpora carry.
    ("session-7:turn-3", False),
    ("tokens:5", True),
]


@pytest.mark.parametrize(("text", "match"), UPSTREAM + PROBES)
def test_the_secret_screen_answers_as_upstream(text, match):
    assert match_string(text) is match


def test_the_screen_runs_in_linear_time_on_adversarial_text():
    # Nested quantifiers that a backtracking engine would take hours on; RE2 reads once.
    for text in ("--password " + "a" * 200_000, '"password":"' + "\\" * 200_001, "a1" * 100_000):
        match_string(text)
