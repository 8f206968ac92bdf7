"""Scores: a run scored against a corpus key (`run`), its tables (`tables`), upstream's Markdown
(`markdown`) and what changed between two scorings (`changes`). The scorer itself, pure, is
`records.scorer`."""
