"""Full-text search over every attempt and call: the index (written in the shard's own
transaction, removed with its run) and the word matching pages build queries on. One seam for
SQLite's FTS5 and PostgreSQL's full-text search (`engine`)."""
