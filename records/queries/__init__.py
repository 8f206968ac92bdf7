"""What pages read: runs and attempts (`runs`), a trace (`trace`), comparisons (`compare`) and
cost (`cost`). Queries aggregate in the database and read one page of rows at a time."""
