"""The index feed: what the indexer reads (memory text) and reports (what it indexed), and the
unindexed recent writes that recall and the duplicate check send the indexer as text."""
