-- GIN indexes normally park new entries in a pending list that every search reads through in
-- full; it grows to 4 MB (gin_pending_list_limit) before an insert or a vacuum merges it, and
-- in a vault of 100,000 memories reading it made full-text search half again as slow at the
-- median and twice as slow at p95 (docs/benchmarks.md, after the indexing table). Merging each
-- write at once costs about 50 µs per memory. The lists already there are merged now.
-- depends: 0004_lifecycle 0011_index_pending

ALTER INDEX memory_search SET (fastupdate = off);
ALTER INDEX memory_depends_on SET (fastupdate = off);
ALTER INDEX memory_similar_to SET (fastupdate = off);
DO $$
BEGIN
    PERFORM gin_clean_pending_list('memory_search'::regclass);
    PERFORM gin_clean_pending_list('memory_depends_on'::regclass);
    PERFORM gin_clean_pending_list('memory_similar_to'::regclass);
END
$$;
