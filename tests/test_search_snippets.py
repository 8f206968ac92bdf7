"""A snippet is cut around the first whole-word match, as the words' pattern finds it, and its
pieces mark every match in the stretch shown (`records.search.snippets`)."""

from __future__ import annotations

import random
import re

from records.search.snippets import snippet, snippet_text


def test_a_word_inside_another_word_or_after_an_underscore_is_told_apart():
    # Letters and digits join a word; an underscore separates words, as in the index.
    assert snippet_text("other thesis bathe", ["the"]) == ""
    assert snippet_text("other x_the end", ["the"]) == "other x_the end"
    assert snippet("café the2 THE", ["the"]) == [("café the2 ", False), ("THE", True)]
    assert snippet("ÉTÉ été", ["été"]) == [("ÉTÉ", True), (" ", False), ("été", True)]


def test_the_first_match_is_the_one_the_whole_word_pattern_finds_first():
    # The snippet finds its first match without testing the character before each position
    # with a look-behind; it must find the very match a pattern that does finds.
    alphabet = "the THE tHe_ xé1 .-\u00e9\u0663 \u00df\u1e9e\u00a0"
    rng = random.Random(7)
    for words in (["the"], ["the", "th"], ["e"], ["ß"], ["a1"]):
        alternatives = "|".join(re.escape(w) for w in words)
        pattern = re.compile(rf"(?<![^\W_])({alternatives})(?![^\W_])", re.IGNORECASE)
        for _ in range(3000):
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
            found = pattern.search(text)
            cut = snippet_text(text, words, width=2)
            if found is None:
                assert cut == "", (words, text)
                continue
            start, end = max(0, found.start() - 2), min(len(text), found.end() + 2)
            expected = " ".join(text[start:end].split())
            assert cut == ("…" if start else "") + expected + ("…" if end < len(text) else "")


def test_a_stretch_folded_apart_is_the_snippet_text():
    # An export finds each stretch in the request and folds it in its writer process.
    from records.search.snippets import folded, stretches

    alphabet = "the THE x \n\t  é.\u00a0\u2028"
    rng = random.Random(11)
    for words in (["the"], ["the", "x"], []):
        stretch = stretches(words, width=3)
        for _ in range(2000):
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))
            found = stretch(text)
            assert folded(found or "") == snippet_text(text, words, width=3), (words, text)
            assert (found is None) == (snippet_text(text, words, width=3) == "")
    # Any other cell is written as it is.
    assert [folded(v) for v in ("", "a\n b", None, 3)] == ["", "a\n b", None, 3]
