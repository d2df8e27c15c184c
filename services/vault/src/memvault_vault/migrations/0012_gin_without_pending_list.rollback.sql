ALTER INDEX memory_search RESET (fastupdate);
ALTER INDEX memory_depends_on RESET (fastupdate);
ALTER INDEX memory_similar_to RESET (fastupdate);
