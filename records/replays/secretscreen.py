"""The secret-shaped-text detector of corvint's `internal/secretscreen` (its `MatchString`),
which the sealed-replay rules use to refuse a label and to withhold an observation. Pure
Python, no Django.

The pattern is assembled piece by piece exactly as upstream's Go source assembles it, and run
by RE2 (google-re2), the engine Go's regexp follows: the same syntax (`\\z`, `\\x{0085}`), the
same leftmost-first alternation and ASCII word boundaries, and linear time on any input, where
a backtracking engine could take hours on some of these branches.
"""

from __future__ import annotations

import re2

# Python's str.strip() whitespace set, as a character-class body.
_WS = (
    r"\t\n\v\f\r\x1c-\x20\x{0085}\x{00a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}"
    r"\x{202f}\x{205f}\x{3000}"
)
_WRITER_NAMES = (
    r"api[_-]?key|access[_-]?key|account[_-]?key|authorization|credential|credentials|"
    r"passphrase|passwd|password|private[_-]?key|secret|token"
)
# A bare "pass" must end the field name ("passed: all checks" is no credential).
_WRITER_FIELDS = r"[a-z0-9_.-]*(?:(?:" + _WRITER_NAMES + r")[a-z0-9_.-]*|pass)"
_QUOTED_ASSIGNMENT = (
    _WRITER_FIELDS
    + "["
    + _WS
    + "]*[:=]["
    + _WS
    + r"""]*(?:"(?:[^"\\]|\\[\s\S])*(?:"|\\?\z)|'(?:[^'\\]|\\[\s\S])*(?:'|\\?\z))"""
)
_AWS_PAIR = r"(?:akia|asia)[a-z0-9]{16}[^a-z0-9]{1,3}[a-z0-9/+]{40}\b"
_AUTHORIZATION_SCHEME = (
    r"[a-z0-9_.-]*authorization[a-z0-9_.-]*["
    + _WS
    + "]*[:=]["
    + _WS
    + r"]*(?:basic|bearer|digest|negotiate|ntlm|token)[ \t]+[^"
    + _WS
    + "]+"
)
_CREDENTIALED_URL = r"[a-z][a-z0-9+.-]*://[^" + _WS + r"""/:?#"']+:[^""" + _WS + r"""/?#"']+@"""
_URL_TOKEN_USERINFO = (
    r"[a-z][a-z0-9+.-]*://(?:(?:gh[pousr]_|github_pat_|gl(?:pat|rt|dt)-|shp(?:at|ss|ca)_|"
    r"ya29\.|gocspx-|npm_|hf_|xox[a-z]-|sk-|[rs]k_(?:live|test)_|dop_v1_)[^"
    + _WS
    + r"/:@]*|[a-z0-9]{32,})@"
)
_BARE_UNIT = r"""(?:[^""" + _WS + r"""\"'\\]|\\[^""" + _WS + r"""])"""
_BARE_FIRST = r"""(?:[^""" + _WS + r"""\"'$\\]|\\[^""" + _WS + r"""])"""
_DOUBLE_UNIT = r"""(?:[^"\\]|\\[\s\S])"""
_DOUBLE_FIRST = r"""(?:[^"\\$]|\\[\s\S])"""
_SINGLE_UNIT = r"""(?:[^'\\]|\\[\s\S])"""
_QUOTED_END = r"\\?\z"


def _letter_and_digit(first: str, unit: str) -> str:
    return (
        "(?:" + first + unit + "*)?(?:[a-z]" + unit + "*[0-9]|[0-9]" + unit + "*[a-z])" + unit + "*"
    )


_CREDENTIAL_ARGUMENT = (
    '(?:"'
    + _letter_and_digit(_DOUBLE_FIRST, _DOUBLE_UNIT)
    + '(?:"|'
    + _QUOTED_END
    + ")|'"
    + _letter_and_digit(_SINGLE_UNIT, _SINGLE_UNIT)
    + "(?:'|"
    + _QUOTED_END
    + ")|"
    + _letter_and_digit(_BARE_FIRST, _BARE_UNIT)
    + ")"
)
_CURL_USER_PASSWORD = (
    '(?:"'
    + _DOUBLE_UNIT
    + "*:"
    + _DOUBLE_UNIT
    + '*(?:"|'
    + _QUOTED_END
    + ")|'"
    + _SINGLE_UNIT
    + "*:"
    + _SINGLE_UNIT
    + "*(?:'|"
    + _QUOTED_END
    + ")|(?:[^"
    + _WS
    + r""":"'\\]|\\[^"""
    + _WS
    + "])+:"
    + _BARE_UNIT
    + "+)"
)
_CREDENTIAL_FLAG = (
    r"\B--?(?:[a-z0-9]+[_-])*(?:"
    + _WRITER_NAMES
    + r"|pass)[ \t]+"
    + _CREDENTIAL_ARGUMENT
    + "|"
    + r"(?:\blogin\b|\B-u)[^\n]*?[ \t]-p(?:[ \t]+|=)"
    + _CREDENTIAL_ARGUMENT
    + "|"
    + r"\bcurl[ \t](?:[^\n]*?[ \t])?(?:-u[ \t]*|--user[ \t]+)"
    + _CURL_USER_PASSWORD
)
_WRITER_VENDORS = (
    r"whsec_[a-z0-9+/=_-]{20,}|hf_[a-z0-9]{20,}|dop_v1_[a-f0-9]{20,}|xapp-[a-z0-9-]{10,}|"
    r"ya29\.[a-z0-9_-]{20,}|gocspx-[a-z0-9_-]{20,}|shp(?:at|ss|ca)_[a-z0-9]{20,}|"
    r"gl(?:rt|dt)-[a-z0-9_-]{20,}|"
    r"https?://hooks\.slack\.com/services/[a-z0-9]+/[a-z0-9]+/[a-z0-9]+"
)


def _secret_pattern(fields: str, credentialed_url: str) -> str:
    return (
        "(?i)"
        + fields
        + "["
        + _WS
        + "]*[:=]["
        + _WS
        + "]*[^"
        + _WS
        + "]+|"
        + r"-----BEGIN [A-Z ]*PRIVATE KEY-----(?s:.*?)-----END [A-Z ]*PRIVATE KEY-----|"
        + r"-----BEGIN [A-Z ]*PRIVATE KEY-----|"
        + r"-----BEGIN PGP PRIV[A]TE KEY BLOCK-----(?s:.*?)-----END PGP PRIV[A]TE KEY BLOCK-----|"
        + r"-----BEGIN PGP PRIV[A]TE KEY BLOCK-----|"
        + credentialed_url
        + "|"
        + r"gh[pousr]_[a-z0-9]{20,}|github_pat_[a-z0-9_]{20,}|"
        + r"glpat-[a-z0-9_-]{20,}|xox[a-z]-[a-z0-9-]{10,}|"
        + r"(?:akia|asia)[a-z0-9]{16}|aiza[a-z0-9_-]{30,}|npm_[a-z0-9]{20,}|"
        + r"\bsk-[a-z0-9_-]{20,}|(?:sk|rk)_(?:live|test)_[a-z0-9]{16,}|"
        + r"pypi-ageichlwasi5vcmc[a-z0-9_-]{20,}|"
        + r"sg\.[a-z0-9_-]{16,}\.[a-z0-9_-]{32,}|sk[0-9a-f]{32}|"
        + r"bearer["
        + _WS
        + r"]+[a-z0-9][a-z0-9_.~+/-]{15,}|"
        + r"[a-z0-9_-]{10,}\.[a-z0-9_-]{10,}\.[a-z0-9_-]{10,}"
    )


PATTERN = re2.compile(
    "(?i)"
    + _QUOTED_ASSIGNMENT
    + "|"
    + _AWS_PAIR
    + "|"
    + _AUTHORIZATION_SCHEME
    + "|"
    + _URL_TOKEN_USERINFO
    + "|"
    + _secret_pattern(_WRITER_FIELDS, _CREDENTIALED_URL)
    + '|"'
    + _WRITER_FIELDS
    + '"['
    + _WS
    + "]*:["
    + _WS
    + r"""]*(?:"(?:[^"\\]|\\[\s\S])*(?:"|\\?\z)|[^"""
    + _WS
    + "]+)|"
    + _WRITER_VENDORS
    + "|"
    + _CREDENTIAL_FLAG
)
# A `go test -v` pass line: a match wholly inside one is not a secret.
_GO_PASS_MARKER = re2.compile(r"(?m)^[ \t]*--- PASS: [^\r\n ]+ \([0-9]+(?:\.[0-9]+)?s\)\r?$")


def match_string(text: str) -> bool:
    """secretscreen.MatchString: whether `text` holds secret-shaped content."""
    protected = [m.span() for m in _GO_PASS_MARKER.finditer(text)]
    for m in PATTERN.finditer(text):
        start, end = m.span()
        if not any(a <= start and end <= b for a, b in protected):
            return True
    return False
