"""LanceDB tables of vectors keyed by `text_id`, for turns and for summaries.

SQLite holds every text; a row here holds only ids, the session id, a timestamp and the
vector, and the caller joins results back by `text_id`. The embedding model's id and size
are recorded in a small JSON file beside the tables, so a model change is noticed. The
whole folder can be rebuilt from SQLite at any time: a rebuild fills a new folder beside it
and swaps it in only when complete, and a damaged folder is moved aside, never deleted.

Why anything beyond LanceDB's own tables and indexes is here: each kind lives in two tables,
like a small LSM tree (numbers: bench/bench_vectors.py, 2 cores):
- `<kind>_recent` takes every write and holds under `recent_rows` rows without an index.
  It is searched through an in-memory copy with numpy (~1 ms for 5,000 rows, where any
  LanceDB query costs ~3 ms however small its table), so its fragments cost no search time
  and it is compacted only every `optimize_every` writes (`recent.py`).
- `<kind>` holds the rest, with an IVF_SQ index (int8 codes) whose candidates are re-ranked
  on the exact vectors, so scores are exact cosine similarities: ~10 ms at 100k rows where a
  flat search takes ~90-190 ms. A full recent table moves here in one write and the index
  is rebuilt (~1-5 s at 100k rows, in the writing thread), because each move would
  otherwise add a delta segment and a fragment that slow every search (+8 ms for the first).
Summaries (one per session) thus stay in memory up to ~5,000 sessions.
- A main table of at most 20,000 rows is searched in a copy in memory (`index.HELD_ROWS`);
  a larger one in an HNSW graph kept beside the tables (`graph.py`, usearch, f16 vectors),
  used only while it matches the table's version, so LanceDB answers whenever it is stale,
  missing or damaged: at 100k turns a search takes ~1 ms there against ~12 ms in LanceDB.
Why not one table: each small append is a fragment searched flat (~1 ms each at 100k rows),
and `optimize()` cannot merge new fragments into an indexed table without adding a delta
segment each time, so a single table needs either slow searches or a rebuild every few writes.

Modules: `records` (rows in, hits out), `filters` (SQL literals), `tables` (one LanceDB
table), `recent` (the in-memory copy), `graph` (the HNSW sidecar, searched), `graph_files`
(its files), `sidecar` (which sidecar a search may use, and its upkeep), `meta` (the model
record), `folders` and `swaps` (moving whole index folders aside and swapping rebuilt ones
in), `upkeep` (compaction, moves, indices), `versions` (the main tables' versions, read
once between writes), `index` (`VectorIndex`, which uses them).
"""

from seelen.vectors.filters import session_filter, sql_in, sql_string
from seelen.vectors.index import VectorIndex
from seelen.vectors.meta import META_FILE
from seelen.vectors.records import KINDS, VectorHit, VectorRow

__all__ = [
    "KINDS",
    "META_FILE",
    "VectorHit",
    "VectorIndex",
    "VectorRow",
    "session_filter",
    "sql_in",
    "sql_string",
]
